package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020900PoolWake adds to each pool cluster the reserved units
// at which a booking wakes pool_mgr (fleet.WakePoints); below them a booking
// cannot change the scaler's decision. 0, the default, wakes it on every
// booking until pool_mgr's next pass sets the point.
func migration202612020900PoolWake() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020900",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`ALTER TABLE pool_clusters ADD COLUMN wake_at_units integer NOT NULL DEFAULT 0`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`ALTER TABLE pool_clusters DROP COLUMN wake_at_units`).Error
		},
	}
}
