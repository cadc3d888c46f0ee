package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// TestManagedClusterTotalFollowsTheRows checks that the total of an
// unfiltered list, read from the per-hub counter, stays the number of rows a
// filtered count gives, through every way a row enters or leaves the list.
func TestManagedClusterTotalFollowsTheRows(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	admin := fleet.Identity{OrgID: "sre"}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("a", "4"), cluster("b", "4"), cluster("c", "4")}})
	steps := []struct {
		name, sql string
		want      int
	}{
		{"after the ingest", ``, 3},
		{"after a tombstone", `UPDATE managed_clusters SET deleted_at = now() WHERE name = 'a'`, 2},
		{"after an update of a tombstone", `UPDATE managed_clusters SET uid = 'x' WHERE name = 'a'`, 2},
		{"after a revival", `UPDATE managed_clusters SET deleted_at = NULL WHERE name = 'a'`, 3},
		{"after a purge", `DELETE FROM managed_clusters WHERE name = 'b'`, 2},
		{"after an insert of a tombstone", `INSERT INTO managed_clusters (hub_id, name, content_hash, deleted_at)
			SELECT hub_id, 'gone', '', now() FROM managed_clusters WHERE name = 'a'`, 2},
		{"after the hub's deletion", `UPDATE hubs SET deleted_at = now()`, 0},
	}
	// A deployment serving another zone sees none of hub-1's (zone eu) clusters.
	cfg := postgres.DefaultStoreConfig()
	cfg.Zones = fleet.Zones{Served: []string{"us"}}
	elsewhere := postgres.NewStore(e.db, nil, fleet.SystemClock{}, cfg, authz.MustDefault())
	if _, total, err := listed(elsewhere.ListManagedClusters(ctx, admin, true, fleet.ListQuery{})); err != nil || total != 0 {
		t.Errorf("ListManagedClusters() serving zone us: total = %d, %v; want 0", total, err)
	}
	for _, step := range steps {
		if step.sql != "" {
			if err := e.db.Gorm.Exec(step.sql).Error; err != nil {
				t.Fatalf("%s: %v", step.sql, err)
			}
		}
		_, total, err := listed(e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{}))
		_, counted, cerr := listed(e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Search: "name like '%'"}))
		if err != nil || cerr != nil || total != step.want || counted != step.want {
			t.Errorf("%s: ListManagedClusters() total = %d (%v), filtered count = %d (%v); want %d", step.name, total, err, counted, cerr, step.want)
		}
	}
}

// TestLabelSearchWithContainmentHint checks that reading a label equality as
// containment, where the search requires it, leaves the results as they were.
func TestLabelSearchWithContainmentHint(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	prod, dev, bare := cluster("prod", "4"), cluster("dev", "4"), cluster("bare", "4")
	dev.Labels = map[string]string{"env": "dev", "team": "a\"b"}
	bare.Labels = map[string]string{}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{prod, dev, bare}})
	cases := []struct {
		search string
		want   []string
	}{
		{"labels.env = 'prod'", []string{"prod"}},
		{"labels.env = 'prod' and name = 'prod'", []string{"prod"}},
		{"labels.env = 'prod' and name = 'dev'", nil},
		{"labels.env = 'prod' or name = 'bare'", []string{"bare", "prod"}},
		{"not labels.env = 'prod'", []string{"dev"}},
		{"labels.team = 'a\"b'", []string{"dev"}},
		{"labels.env = 'dev' and labels.team = 'a\"b'", []string{"dev"}},
		{"labels.env = 'prod' and labels.team = 'a\"b'", nil},
		{"name = 'dev' and (labels.env = 'dev' or labels.env = 'prod')", []string{"dev"}},
		{"labels.env != 'prod'", []string{"dev"}},
		{"labels.env is null", []string{"bare"}},
	}
	for _, tc := range cases {
		got, total, err := listed(e.store.ListManagedClusters(ctx, fleet.Identity{}, true, fleet.ListQuery{Search: tc.search}))
		if err != nil || total != len(tc.want) || !slices.Equal(names(got), tc.want) {
			t.Errorf("ListManagedClusters(%q) = %v (total %d), %v; want %v", tc.search, names(got), total, err, tc.want)
		}
	}
}
