package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300012FeedOrg makes an organisation's page of the change
// feed cost what the organisation sees when it is read from the
// organisation's hubs and registrations (orgChangesSQL): the changes of one
// hub in order, (hub_id, change_xid, change_seq), for the hubs it owns; the
// changes of one registration's clusters in order, for its registrations on
// shared hubs, replacing the index on registration_id alone, which the new
// one serves too; and the registrations of an organisation, deleted ones
// included (the indexes on org_id only hold live ones), since the clusters
// of a deleted registration stay visible to its organisation.
func migration202611300012FeedOrg() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300012",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE INDEX managed_clusters_hub_change ON managed_clusters (hub_id, change_xid, change_seq);
CREATE INDEX managed_clusters_registration_change ON managed_clusters (registration_id, change_xid, change_seq)
	WHERE registration_id IS NOT NULL;
DROP INDEX managed_clusters_registration;
CREATE INDEX registrations_org ON registrations (org_id);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP INDEX registrations_org;
CREATE INDEX managed_clusters_registration ON managed_clusters (registration_id) WHERE registration_id IS NOT NULL;
DROP INDEX managed_clusters_registration_change;
DROP INDEX managed_clusters_hub_change;
`).Error
		},
	}
}
