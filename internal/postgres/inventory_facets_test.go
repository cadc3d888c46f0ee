package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestFacetTotalsFollowTheRows checks that the totals of searches by one
// region or one counted label, read from managed_cluster_facet_counts, stay
// the counts of the rows through every kind of write, and that changing the
// counted labels counts the added keys' existing rows.
func TestFacetTotalsFollowTheRows(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	if err := e.store.SyncCountedLabels(ctx, []string{"env"}); err != nil {
		t.Fatal(err)
	}
	a, b, c := cluster("a", "4"), cluster("b", "4"), cluster("c", "4")
	c.Labels = map[string]string{"env": "dev", "team": "blue"}
	c.Claims[fleet.ClaimRegion] = "us-east-1"
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{a, b, c}})
	admin := fleet.Identity{OrgID: "sre"}
	searches := []string{"labels.env = 'prod'", "labels.env = 'dev'", "region = 'eu-west-1'", "region = 'us-east-1'", "labels.team = 'blue'", "labels.env = 'none'"}
	check := func(step string) {
		t.Helper()
		for _, search := range searches {
			// "and name like '%'" makes the search one the counters do not answer.
			_, total, err := listed(e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Search: search}))
			_, counted, cerr := listed(e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Search: search + " and name like '%'"}))
			if err != nil || cerr != nil || total != counted {
				t.Errorf("%s: total of %q = %d (%v), count of its rows = %d (%v)", step, search, total, err, counted, cerr)
			}
		}
	}
	check("after the ingest")
	for _, step := range []struct{ name, sql string }{
		{"after a tombstone", `UPDATE managed_clusters SET deleted_at = now() WHERE name = 'a'`},
		{"after a label change", `UPDATE managed_clusters SET labels = '{"env": "dev"}' WHERE name = 'b'`},
		{"after a region change", `UPDATE managed_clusters SET region = 'us-east-1' WHERE name = 'b'`},
		{"after an update of a tombstone", `UPDATE managed_clusters SET labels = '{"env": "qa"}' WHERE name = 'a'`},
		{"after a revival", `UPDATE managed_clusters SET deleted_at = NULL WHERE name = 'a'`},
		{"after a purge", `DELETE FROM managed_clusters WHERE name = 'c'`},
		{"after an insert of a tombstone", `INSERT INTO managed_clusters (hub_id, name, content_hash, labels, deleted_at)
			SELECT hub_id, 'gone', '', '{"env": "dev"}', now() FROM managed_clusters WHERE name = 'a'`},
	} {
		if err := e.db.Gorm.Exec(step.sql).Error; err != nil {
			t.Fatalf("%s: %v", step.sql, err)
		}
		check(step.name)
	}

	// The counters answer: a count moved by hand shows in the total.
	if err := e.db.Gorm.Exec(`UPDATE managed_cluster_facet_counts SET live = live + 100 WHERE facet = 'labels.env' AND value = 'dev'`).Error; err != nil {
		t.Fatal(err)
	}
	if _, total, err := listed(e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Search: "labels.env = 'dev'"})); err != nil || total != 101 {
		t.Errorf("total of labels.env = 'dev' with its counter moved by 100 = %d, %v; want 101 (read from the counter)", total, err)
	}
	if err := e.db.Gorm.Exec(`UPDATE managed_cluster_facet_counts SET live = live - 100 WHERE facet = 'labels.env' AND value = 'dev'`).Error; err != nil {
		t.Fatal(err)
	}

	// Counting team from now on counts the rows already there; env no more.
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{c}})
	if err := e.store.SyncCountedLabels(ctx, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	var teams, envs int64
	e.db.Gorm.Raw(`SELECT coalesce(sum(live), 0) FROM managed_cluster_facet_counts WHERE facet = 'labels.team' AND value = 'blue'`).Scan(&teams)
	e.db.Gorm.Raw(`SELECT count(*) FROM managed_cluster_facet_counts WHERE facet = 'labels.env'`).Scan(&envs)
	if teams != 1 || envs != 0 {
		t.Errorf("after counting team instead of env: team=blue counted %d, env counters %d; want 1 and 0", teams, envs)
	}
	check("after changing the counted labels")
	if _, total, err := listed(e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Search: "labels.team = 'blue'"})); err != nil || total != 1 {
		t.Errorf("total of labels.team = 'blue' = %d, %v; want 1", total, err)
	}
	if err := e.db.Gorm.Exec(`UPDATE hubs SET deleted_at = now()`).Error; err != nil {
		t.Fatal(err)
	}
	check("after the hub's deletion")
}

// TestSyncCountedLabelsConcurrently starts replicas together with a newly
// counted label, as a rollout does: every one's SyncCountedLabels succeeds,
// and the added key's values are counted once.
func TestSyncCountedLabelsConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, cfg := pgtest.NewMigratedDatabase(t)
	key := masterKey(t)
	first := postgres.NewStore(db, mustKeyring(t, key), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	hub, err := first.CreateHub(ctx, fleet.HubCreate{Name: "hub-1", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := cluster("a", "4"), cluster("b", "4"), cluster("c", "4")
	a.Labels, b.Labels, c.Labels = map[string]string{"team": "blue"}, map[string]string{"team": "blue"}, map[string]string{"team": "red"}
	if _, err := first.IngestInventory(ctx, hub.ID, "agent-1", fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{a, b, c}}); err != nil {
		t.Fatalf("IngestInventory() = %v", err)
	}

	const replicas = 6
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		stores[i] = postgres.NewStore(pgtest.Open(t, cfg), mustKeyring(t, key), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	}
	start := make(chan struct{})
	errs := make(chan error, replicas)
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			<-start
			errs <- s.SyncCountedLabels(ctx, []string{"env", "team"})
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("SyncCountedLabels([env team]) beside %d other replicas = %v", replicas-1, err)
		}
	}
	var counts []struct {
		Value string
		Live  int
	}
	if err := db.Gorm.Raw(`SELECT value, live FROM managed_cluster_facet_counts WHERE facet = 'labels.team' ORDER BY value`).Scan(&counts).Error; err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts[0].Value != "blue" || counts[0].Live != 2 || counts[1].Value != "red" || counts[1].Live != 1 {
		t.Errorf("labels.team counters after %d concurrent SyncCountedLabels = %+v; want blue 2, red 1", replicas, counts)
	}
	if n := countRows(t, db, `SELECT count(*) FROM inventory_counted_labels WHERE key IN ('env', 'team')`); n != 2 {
		t.Errorf("counted labels env and team: %d rows, want 2", n)
	}
}
