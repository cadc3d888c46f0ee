package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612012000RegistrationAcks indexes the revisions a hub's
// registrations were published and withdrawn in, so that an agent's
// acknowledgement finds the registrations it finishes (wakeAcknowledged)
// through an index range, instead of reading every registration of the hub.
// Both indexes leave out the rows without such a revision: a new registration
// costs them nothing until it is published.
func migration202612012000RegistrationAcks() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612012000",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE INDEX registrations_hub_published ON registrations (hub_id, published_revision)
	WHERE deleted_at IS NULL AND published_revision IS NOT NULL;
CREATE INDEX registrations_hub_withdrawn ON registrations (hub_id, withdrawn_revision)
	WHERE deleted_at IS NULL AND withdrawn_revision IS NOT NULL;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP INDEX registrations_hub_withdrawn; DROP INDEX registrations_hub_published;`).Error
		},
	}
}
