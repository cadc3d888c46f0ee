package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300004SyncSet adds SyncSet delivery: where a SyncSet hub's
// SyncSets go (OCM or Hive), and which delivery mode holds each
// registration's objects, so a hub can move from a SyncSet to its agent.
func migration202611300004SyncSet() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300004",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE hubs
	ADD COLUMN ocm  jsonb,
	ADD COLUMN hive jsonb;
ALTER TABLE registrations
	ADD COLUMN delivered_via text NOT NULL DEFAULT '';
-- Registrations delivered before this migration went through their hub's agent.
UPDATE registrations r SET delivered_via = h.delivery_mode
FROM hubs h WHERE r.hub_id = h.id AND r.published_revision IS NOT NULL;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE registrations DROP COLUMN delivered_via;
ALTER TABLE hubs DROP COLUMN hive, DROP COLUMN ocm;
`).Error
		},
	}
}
