package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612011900RegistrationReads gives an organisation's list of
// registrations (ListRegistrations) an index for each search it serves, so
// that neither a page nor the count of a search's total reads the table
// from end to end (docs/registrations.md, "Order and pages"). Each index
// holds the live rows only and leads with the organisation, which every list
// reads by:
//
//   - registrations_org_phase and registrations_org_hub: a phase or a hub's
//     registrations in the default order, read (and counted) from the index
//     alone;
//   - registrations_org_name_pattern: `name like 'prefix%'` (and `name =`),
//     which a btree of the database's collation serves only under the C
//     collation;
//   - registrations_labels_live replaces registrations_labels: a label's
//     containment (`labels.k = 'v'`) on the live rows, in jsonb_path_ops,
//     smaller and faster for `@>`, the only operator the list's search gives
//     it;
//   - registrations_org_name_live, the unique name of a live registration,
//     is rebuilt with the id and the phase included, so the list in the
//     order of names (name, then id), of every phase or of one, finds a deep
//     page's ids from the index alone.
//
// Each index costs every create a little: only those the list's plans use
// are here.
func migration202612011900RegistrationReads() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612011900",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE INDEX registrations_org_phase ON registrations (org_id, phase, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX registrations_org_hub ON registrations (org_id, hub_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX registrations_org_name_pattern ON registrations (org_id, name text_pattern_ops) WHERE deleted_at IS NULL;
CREATE INDEX registrations_labels_live ON registrations USING gin (labels jsonb_path_ops) WHERE deleted_at IS NULL;
DROP INDEX registrations_labels;
CREATE UNIQUE INDEX registrations_org_name_live_id ON registrations (org_id, name) INCLUDE (id, phase) WHERE deleted_at IS NULL;
DROP INDEX registrations_org_name_live;
ALTER INDEX registrations_org_name_live_id RENAME TO registrations_org_name_live;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE UNIQUE INDEX registrations_org_name_live_plain ON registrations (org_id, name) WHERE deleted_at IS NULL;
DROP INDEX registrations_org_name_live;
ALTER INDEX registrations_org_name_live_plain RENAME TO registrations_org_name_live;
CREATE INDEX registrations_labels ON registrations USING gin (labels);
DROP INDEX registrations_labels_live;
DROP INDEX registrations_org_name_pattern;
DROP INDEX registrations_org_hub;
DROP INDEX registrations_org_phase;
`).Error
		},
	}
}
