package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612072200AckWakeCursor lets the acknowledgement's wake-up
// (Queue.WakeAcknowledged) work a hub's acknowledged registrations in
// batches: each batch reads the next rows of the hub in (revision, id)
// order, so the indexes on the published and withdrawn revisions gain the
// id (the withdrawals' index keeps the deregistered rows, as the desired
// set's deltas need them), and the hub keeps where the last batch stopped (the cursor is only
// read while its revision is above woken_revision). The previous release
// reads neither column, and its own wake-up statement is served by the new
// indexes as well as by those they replace. It also indexes each zone's
// unplaced registrations by when they are due (never, last), so that
// hub_mgr's requeue (HubStore.RequeueUnplaced) reads those waiting, not
// those already due.
func migration202612072200AckWakeCursor() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612072200",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE hubs ADD COLUMN wake_cursor_revision bigint, ADD COLUMN wake_cursor_id text;
CREATE INDEX registrations_hub_published_id ON registrations (hub_id, published_revision, id)
	WHERE deleted_at IS NULL AND published_revision IS NOT NULL;
CREATE INDEX registrations_hub_withdrawals_id ON registrations (hub_id, withdrawn_revision, id)
	WHERE withdrawn_revision IS NOT NULL;
DROP INDEX registrations_hub_published;
DROP INDEX registrations_hub_withdrawals;
CREATE INDEX registrations_unplaced_waiting ON registrations (zone, (coalesce(next_attempt_at, 'infinity'::timestamptz)))
	WHERE deleted_at IS NULL AND hub_id IS NULL AND deletion_requested_at IS NULL;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP INDEX registrations_unplaced_waiting;
CREATE INDEX registrations_hub_published ON registrations (hub_id, published_revision)
	WHERE deleted_at IS NULL AND published_revision IS NOT NULL;
CREATE INDEX registrations_hub_withdrawals ON registrations (hub_id, withdrawn_revision)
	WHERE withdrawn_revision IS NOT NULL;
DROP INDEX registrations_hub_withdrawals_id;
DROP INDEX registrations_hub_published_id;
ALTER TABLE hubs DROP COLUMN wake_cursor_id, DROP COLUMN wake_cursor_revision;
`).Error
		},
	}
}
