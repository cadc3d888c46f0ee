package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612021700OrgLimits keeps the capacity-pool limits an
// administrator gave one organisation (the admin API); an organisation
// without a row, or a NULL column, has the deployment's default.
func migration202612021700OrgLimits() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021700",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE org_limits (
	org_id             text PRIMARY KEY,
	max_pools          integer CHECK (max_pools >= 0),
	max_pool_clusters  integer CHECK (max_pool_clusters >= 0),
	max_reserved_units integer CHECK (max_reserved_units >= 0),
	updated_by         text NOT NULL DEFAULT '',
	updated_at         timestamptz NOT NULL DEFAULT now()
);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP TABLE org_limits`).Error
		},
	}
}
