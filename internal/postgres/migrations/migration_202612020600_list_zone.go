package migrations

import (
	"strings"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020600ListZone rebuilds the organisation's list indexes of
// live registrations with the zone included: a deployment that serves some
// zones only (--served-zones) tests every row's zone, and without it in the
// index each row the list skips or counts was read from the table, so a deep
// page, or the count of a hub's registrations, read as many rows as it
// skipped (docs/performance.md). The indexes keep their names, keys and
// uniqueness: registrations_org_name_live is the constraint a create's
// duplicate name is told by.
func migration202612020600ListZone() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020600",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(listZoneIndexes(true)).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(listZoneIndexes(false)).Error
		},
	}
}

// listZoneIndexes replaces the four list indexes by ones that include, after
// their keys, what they included before and, withZone, the zone.
func listZoneIndexes(withZone bool) string {
	sql := ""
	for _, ix := range []struct{ unique, name, keys, include string }{
		{"", "registrations_org_created", "org_id, created_at, id", ""},
		{"", "registrations_org_phase", "org_id, phase, created_at, id", ""},
		{"", "registrations_org_hub", "org_id, hub_id, created_at, id", ""},
		{"UNIQUE ", "registrations_org_name_live", "org_id, name", "id, phase"},
	} {
		include := ix.include
		if withZone {
			include = strings.TrimPrefix(include+", zone", ", ")
		}
		if include != "" {
			include = " INCLUDE (" + include + ")"
		}
		sql += `CREATE ` + ix.unique + `INDEX ` + ix.name + `_next ON registrations (` + ix.keys + `)` + include + ` WHERE deleted_at IS NULL;
DROP INDEX ` + ix.name + `;
ALTER INDEX ` + ix.name + `_next RENAME TO ` + ix.name + `;
`
	}
	return sql
}
