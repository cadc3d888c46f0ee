package migrations_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestAutovacuumSettings shows the churned tables carry their autovacuum
// settings once migrated (docs/database-maintenance.md), and no other table
// does.
func TestAutovacuumSettings(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	var rows []struct {
		Relname    string
		Reloptions string
	}
	if err := db.Gorm.WithContext(context.Background()).Raw(`SELECT relname, array_to_string(reloptions, ',') AS reloptions
		FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND reloptions IS NOT NULL`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	want := []string{"autovacuum_vacuum_scale_factor=0.02", "autovacuum_vacuum_threshold=1000",
		"autovacuum_analyze_scale_factor=0.01", "autovacuum_vacuum_insert_scale_factor=0.05"}
	got := map[string][]string{}
	for _, r := range rows {
		got[r.Relname] = strings.Split(r.Reloptions, ",")
	}
	for _, table := range []string{"managed_clusters", "resources", "registrations"} {
		if !slices.Equal(got[table], want) {
			t.Errorf("reloptions of %s = %v, want %v", table, got[table], want)
		}
		delete(got, table)
	}
	if len(got) > 0 {
		t.Errorf("other tables with storage settings: %v", got)
	}
}
