package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020200ClaimAcknowledged adds woken_by_ack, set by an
// agent's acknowledgement on the registrations it finishes
// (wakeAcknowledged) and cleared by the record of their next pass, and
// indexes the due rows that hold it: the work queue claims them before any
// other (Queue.ClaimRegistrations). The column's constant default adds it
// without rewriting the table, and the index holds only the rows an
// acknowledgement woke and no pass recorded since.
func migration202612020200ClaimAcknowledged() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020200",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE registrations ADD COLUMN woken_by_ack boolean NOT NULL DEFAULT false;
CREATE INDEX registrations_work_acknowledged ON registrations (next_attempt_at, id)
	WHERE deleted_at IS NULL AND next_attempt_at IS NOT NULL AND woken_by_ack;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP INDEX registrations_work_acknowledged; ALTER TABLE registrations DROP COLUMN woken_by_ack;`).Error
		},
	}
}
