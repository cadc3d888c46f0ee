package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612011400DeliveryFailures keeps, per registration and per
// policy on a hub, why the hub's agent could not apply its objects at the
// revision it acknowledged: a failed entry fails its owner only, and the
// rest of the hub's desired set counts as delivered.
func migration202612011400DeliveryFailures() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612011400",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE registrations ADD COLUMN delivery_failure jsonb;
ALTER TABLE policy_hubs ADD COLUMN delivery_failure jsonb;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE registrations DROP COLUMN delivery_failure;
ALTER TABLE policy_hubs DROP COLUMN delivery_failure;
`).Error
		},
	}
}
