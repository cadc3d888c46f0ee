package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612021400ClusterIdentity indexes the live clusters by their
// id.openshift.io claim, so the user-facing metrics find, for an
// organisation's clusters, those of other organisations that carry the same
// identity (markSharedIdentities) without reading the fleet.
func migration202612021400ClusterIdentity() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021400",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`CREATE INDEX managed_clusters_cluster_id ON managed_clusters (cluster_id) WHERE deleted_at IS NULL AND cluster_id <> ''`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP INDEX managed_clusters_cluster_id`).Error
		},
	}
}
