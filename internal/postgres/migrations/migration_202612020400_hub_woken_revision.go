package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020400HubWokenRevision adds woken_revision: the revision of
// the hub's desired set up to which the registrations its agent's
// acknowledgements finished have been woken. The wake-up runs after the
// heartbeat's transaction, in one of its own (RecordHubHeartbeat), so that
// its wait for rows a reconciler's pass holds no longer holds the hub's row,
// which every publication to the hub locks first; a wake-up that did not
// happen (a failed statement, a crash between the two) is made by the
// hub's next heartbeat, from this revision on. Every existing hub's
// acknowledgements were woken in the heartbeat's own transaction.
func migration202612020400HubWokenRevision() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020400",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`ALTER TABLE hubs ADD COLUMN woken_revision bigint NOT NULL DEFAULT 0;
UPDATE hubs SET woken_revision = applied_revision`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`ALTER TABLE hubs DROP COLUMN woken_revision`).Error
		},
	}
}
