package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300010ResourcesFeed gives every resources row its change
// position, as migration202611300006Feed did for managed_clusters: the same
// trigger function and sequence set (change_xid, change_seq) on every insert
// and update, so the objects of every kind are ordered with the clusters on
// one timeline and one cursor format serves both feeds. The feed reads one
// kind at a time, so its index leads with the kind; the tombstone purge of
// resources finds its rows by deleted_at, and records its horizon in
// inventory_purge_horizon under table_name 'resources'.
func migration202611300010ResourcesFeed() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300010",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE resources
	ADD COLUMN change_xid xid8   NOT NULL DEFAULT '0',
	ADD COLUMN change_seq bigint NOT NULL DEFAULT 0;
UPDATE resources SET change_xid = pg_current_xact_id(), change_seq = nextval('inventory_change_seq');
CREATE TRIGGER resources_change_position BEFORE INSERT OR UPDATE ON resources
	FOR EACH ROW EXECUTE FUNCTION inventory_change_position();
CREATE INDEX resources_change ON resources (api_group, kind, change_xid, change_seq);
CREATE INDEX resources_tombstones ON resources (deleted_at) WHERE deleted_at IS NOT NULL;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DELETE FROM inventory_purge_horizon WHERE table_name = 'resources';
DROP INDEX resources_tombstones;
DROP INDEX resources_change;
DROP TRIGGER resources_change_position ON resources;
ALTER TABLE resources DROP COLUMN change_seq, DROP COLUMN change_xid;
`).Error
		},
	}
}
