package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612012200ClaimOrder indexes the due registrations a user waits
// for (the postgres package's unsettledSQL, whose predicate the index
// repeats: the planner reads it only while the two match, which
// TestDeprovisionWorkReadsItsIndex checks), which the work queue claims
// before the rechecks of settled ones (Queue.ClaimRegistrations): found in
// due order without walking past the rechecks that fell due before them.
func migration202612012200ClaimOrder() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612012200",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`CREATE INDEX registrations_work_unsettled ON registrations (next_attempt_at, id)
	WHERE deleted_at IS NULL AND next_attempt_at IS NOT NULL AND (phase <> 'ready' OR observed_generation < generation)`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP INDEX registrations_work_unsettled`).Error
		},
	}
}
