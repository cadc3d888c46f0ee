package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020300DeprovisionWork indexes the work of deleting_mgr
// apart: the registrations being deregistered, by when they are due. Its
// claims and NextDue otherwise walked the index of every due registration
// and filtered out all but these, so during a bulk onboarding (a backlog of
// due registrations, none of them being deregistered) each of deleting_mgr's
// passes read the whole backlog to find nothing. The index holds only the
// rows being deregistered, a few at any time.
func migration202612020300DeprovisionWork() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020300",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`CREATE INDEX registrations_work_deprovision ON registrations (next_attempt_at, id)
	WHERE deleted_at IS NULL AND next_attempt_at IS NOT NULL AND deletion_requested_at IS NOT NULL`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP INDEX registrations_work_deprovision`).Error
		},
	}
}
