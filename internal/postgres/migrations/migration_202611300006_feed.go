package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300006Feed gives every managed_clusters row its change
// position, (change_xid, change_seq): the transaction that last wrote it and
// a sequence number, set by a BEFORE trigger on every insert and update
// (upsert, tombstone, revival), so no writer can forget it. The change feed
// reads in that order and only below the oldest transaction still running,
// so a row committed late can never land behind a cursor already handed out.
// inventory_purge_horizon records, per table, the highest position the
// tombstone purge deleted: a cursor below it may have missed a deletion.
func migration202611300006Feed() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300006",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE SEQUENCE inventory_change_seq;
CREATE FUNCTION inventory_change_position() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.change_xid := pg_current_xact_id();
	NEW.change_seq := nextval('inventory_change_seq');
	RETURN NEW;
END $$;
ALTER TABLE managed_clusters
	ADD COLUMN change_xid xid8   NOT NULL DEFAULT '0',
	ADD COLUMN change_seq bigint NOT NULL DEFAULT 0;
UPDATE managed_clusters SET change_xid = pg_current_xact_id(), change_seq = nextval('inventory_change_seq');
CREATE TRIGGER managed_clusters_change_position BEFORE INSERT OR UPDATE ON managed_clusters
	FOR EACH ROW EXECUTE FUNCTION inventory_change_position();
CREATE INDEX managed_clusters_change ON managed_clusters (change_xid, change_seq);
CREATE INDEX managed_clusters_tombstones ON managed_clusters (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE TABLE inventory_purge_horizon (
	table_name text   PRIMARY KEY,
	change_xid xid8   NOT NULL,
	change_seq bigint NOT NULL,
	purged_at  timestamptz NOT NULL DEFAULT now()
);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TABLE inventory_purge_horizon;
DROP TRIGGER managed_clusters_change_position ON managed_clusters;
ALTER TABLE managed_clusters DROP COLUMN change_seq, DROP COLUMN change_xid;
DROP FUNCTION inventory_change_position();
DROP SEQUENCE inventory_change_seq;
`).Error
		},
	}
}
