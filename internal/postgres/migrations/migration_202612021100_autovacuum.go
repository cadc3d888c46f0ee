package migrations

import (
	"fmt"
	"strings"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// autovacuumTables are the large tables whose rows are rewritten all day
// (agents' content changes, tombstones and purges, the registrations' work
// queue), with the storage settings that vacuum and analyze them in
// proportion to their churn rather than to their size.
// docs/database-maintenance.md has the measurement that chose them.
var autovacuumTables = []string{"managed_clusters", "resources", "registrations"}

// autovacuumSettings vacuum a table once about one row in fifty is dead (the
// default waits for one in five), analyze it once one in a hundred changed,
// and vacuum after inserts sooner, so its visibility map and its planner
// statistics keep up.
const autovacuumSettings = `autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000,
	autovacuum_analyze_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.05`

// migration202612021100Autovacuum sets autovacuumSettings on
// autovacuumTables. Changing storage parameters takes a lock that blocks
// neither reads nor writes, and the previous release ignores them.
func migration202612021100Autovacuum() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021100",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(autovacuumSQL("SET (" + autovacuumSettings + ")")).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(autovacuumSQL(`RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
	autovacuum_analyze_scale_factor, autovacuum_vacuum_insert_scale_factor)`)).Error
		},
	}
}

func autovacuumSQL(change string) string {
	var b strings.Builder
	for _, table := range autovacuumTables {
		fmt.Fprintf(&b, "ALTER TABLE %s %s;\n", table, change)
	}
	return b.String()
}
