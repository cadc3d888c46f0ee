package postgres

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300013InventoryDocuments stores a managed cluster's claims,
// capacity, allocatable and conditions as json, the text the agent sent,
// instead of jsonb. They are only ever read whole, into the answers of the
// inventory, and PostgreSQL writes out a jsonb value by walking it: for a
// page of 100 clusters that was about 1.2 ms of the database's CPU, against
// about 0.3 ms for json (docs/performance.md). No query looks inside them,
// so nothing is lost; labels, which searches and indexes read, stay jsonb.
// fleet_clusters_v1 keeps its column types by casting capacity and
// allocatable back to jsonb. The change rewrites managed_clusters under an
// ACCESS EXCLUSIVE lock: 18 s for 300,000 rows (docs/operations.md).
func migration202611300013InventoryDocuments() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300013",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP VIEW fleet_clusters_v1;
ALTER TABLE managed_clusters
	ALTER COLUMN claims DROP DEFAULT, ALTER COLUMN claims TYPE json USING claims::json,
	ALTER COLUMN claims SET DEFAULT '{}',
	ALTER COLUMN capacity DROP DEFAULT, ALTER COLUMN capacity TYPE json USING capacity::json,
	ALTER COLUMN capacity SET DEFAULT '{}',
	ALTER COLUMN allocatable DROP DEFAULT, ALTER COLUMN allocatable TYPE json USING allocatable::json,
	ALTER COLUMN allocatable SET DEFAULT '{}',
	ALTER COLUMN conditions DROP DEFAULT, ALTER COLUMN conditions TYPE json USING conditions::json,
	ALTER COLUMN conditions SET DEFAULT '[]';
` + clusterViewV1SQL("mc.capacity::jsonb", "mc.allocatable::jsonb")).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP VIEW fleet_clusters_v1;
ALTER TABLE managed_clusters
	ALTER COLUMN claims DROP DEFAULT, ALTER COLUMN claims TYPE jsonb USING claims::jsonb,
	ALTER COLUMN claims SET DEFAULT '{}',
	ALTER COLUMN capacity DROP DEFAULT, ALTER COLUMN capacity TYPE jsonb USING capacity::jsonb,
	ALTER COLUMN capacity SET DEFAULT '{}',
	ALTER COLUMN allocatable DROP DEFAULT, ALTER COLUMN allocatable TYPE jsonb USING allocatable::jsonb,
	ALTER COLUMN allocatable SET DEFAULT '{}',
	ALTER COLUMN conditions DROP DEFAULT, ALTER COLUMN conditions TYPE jsonb USING conditions::jsonb,
	ALTER COLUMN conditions SET DEFAULT '[]';
` + clusterViewV1SQL("mc.capacity", "mc.allocatable")).Error
		},
	}
}
