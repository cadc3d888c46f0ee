package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612021000PoolConditions adds the conditions pool_mgr keeps on
// each capacity pool (fleet.PoolConditions), from which its phase is derived.
func migration202612021000PoolConditions() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021000",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`ALTER TABLE capacity_pools ADD COLUMN conditions jsonb NOT NULL DEFAULT '[]'`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`ALTER TABLE capacity_pools DROP COLUMN conditions`).Error
		},
	}
}
