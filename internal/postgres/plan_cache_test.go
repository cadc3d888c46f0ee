package postgres_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestConnectionsPlanWithTheirValues checks that the pool's connections plan
// every prepared statement with its values (plan_cache_mode), not with a
// generic plan after five runs.
func TestConnectionsPlanWithTheirValues(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	var mode string
	if err := db.Gorm.Raw(`SHOW plan_cache_mode`).Scan(&mode).Error; err != nil || mode != "force_custom_plan" {
		t.Errorf("plan_cache_mode = %q, %v; want force_custom_plan", mode, err)
	}
}
