package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020100DesiredChanges indexes every withdrawal of a hub's
// registrations by revision, deregistered rows included, so that a delta of
// the hub's desired set (Store.DesiredChanges, ADR 0017) finds the
// registrations withdrawn since a revision through an index range: a
// registration withdrawn and then deleted is still a removal the agent must
// hear of. It replaces the index of the live withdrawals
// (migration202612012000RegistrationAcks), which it covers.
func migration202612020100DesiredChanges() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020100",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE INDEX registrations_hub_withdrawals ON registrations (hub_id, withdrawn_revision)
	WHERE withdrawn_revision IS NOT NULL;
DROP INDEX registrations_hub_withdrawn;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE INDEX registrations_hub_withdrawn ON registrations (hub_id, withdrawn_revision)
	WHERE deleted_at IS NULL AND withdrawn_revision IS NOT NULL;
DROP INDEX registrations_hub_withdrawals;
`).Error
		},
	}
}
