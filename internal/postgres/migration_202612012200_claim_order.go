package postgres

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612012200ClaimOrder indexes the due registrations a user waits
// for (unsettledSQL), which the work queue claims before the rechecks of
// settled ones (Queue.ClaimRegistrations): found in due order without
// walking past the rechecks that fell due before them.
func migration202612012200ClaimOrder() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612012200",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`CREATE INDEX registrations_work_unsettled ON registrations (next_attempt_at, id)
	WHERE deleted_at IS NULL AND next_attempt_at IS NOT NULL AND ` + unsettledSQL).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP INDEX registrations_work_unsettled`).Error
		},
	}
}
