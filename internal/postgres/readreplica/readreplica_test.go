package readreplica_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica/readreplicatest"
)

// follower reads the change feed in small pages, as a consumer catching up.
type follower struct {
	cursor string
	seen   []string
}

// catchUp reads pages until one comes back empty.
func (f *follower) catchUp(t *testing.T, store *postgres.Store) {
	t.Helper()
	for {
		page, err := store.ListManagedClusterChanges(context.Background(), fleet.Identity{OrgID: "ops"}, true, f.cursor, 5)
		if err != nil {
			t.Fatalf("ListManagedClusterChanges(%q): %v", f.cursor, err)
		}
		f.cursor = page.Cursor
		if len(page.Items) == 0 {
			return
		}
		for _, it := range page.Items {
			f.seen = append(f.seen, it.Cluster.Name)
		}
	}
}

// followUntil catches up until the follower has seen n changes.
func (f *follower) followUntil(t *testing.T, store *postgres.Store, n int) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() int { f.catchUp(t, store); return len(f.seen) }).
		WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(gomega.BeNumerically(">=", n), "changes followed")
}

// TestReadReplicaServesFreshReadsAndFallsBack runs the heavy reads against
// a real streaming standby: served by it while fresh; on the primary, with
// the new rows, once a paused replay lets the proven staleness pass the
// bound; back on the standby after the replay resumes; on the primary,
// without an error, when the standby is down. A follower of the change feed
// reads across every switch and sees every change once, in the primary's
// order.
func TestReadReplicaServesFreshReadsAndFallsBack(t *testing.T) {
	t.Parallel()
	e := readreplicatest.New(t, readreplicatest.ShortBound, authz.MustDefault())
	g := gomega.NewWithT(t)
	var f follower

	// Fresh: the standby answers the list and the feed's full pages.
	e.Ingest(30)
	e.ReplicaAnswers(30)
	f.followUntil(t, e.Store, 30)
	g.Expect(e.Reads("inventory_feed", "replica")).To(gomega.BeNumerically(">", 0), "feed pages served by the standby")

	// Paused: a read never misses a write older than the bound, and once
	// the bound has passed the reads stay on the primary.
	e.StandbySQL("SELECT pg_wal_replay_pause()")
	e.Ingest(10)
	wrote := time.Now()
	primaryBefore := e.Reads("inventory_list", "primary")
	g.Eventually(func(g gomega.Gomega) {
		start := time.Now()
		n := e.List()
		if since := start.Sub(wrote); since > e.Bound && n != 40 {
			t.Errorf("ListManagedClusters() %s after the write, past the bound %s = %d clusters, want 40", since, e.Bound, n)
		}
		g.Expect(n).To(gomega.Equal(40))
	}).WithTimeout(4 * e.Bound).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(e.Reads("inventory_list", "primary")).To(gomega.BeNumerically(">", primaryBefore), "list reads on the primary")
	g.Expect(e.Counter("fm_db_replica_fallbacks_total", map[string]string{"read": "inventory_list", "reason": "stale"})).
		To(gomega.BeNumerically(">", 0))
	g.Expect(e.Counter("fm_db_replica_staleness_seconds", nil)).To(gomega.BeNumerically(">", e.Bound.Seconds()))
	f.followUntil(t, e.Store, 40)

	// Resumed: the standby catches up and serves again.
	e.StandbySQL("SELECT pg_wal_replay_resume()")
	e.Ingest(10)
	feedBefore := e.Reads("inventory_feed", "replica")
	e.ReplicaAnswers(50)
	f.followUntil(t, e.Store, 50)
	g.Expect(e.Reads("inventory_feed", "replica")).To(gomega.BeNumerically(">", feedBefore), "feed pages served by the standby again")

	// Down: the reads go to the primary, never an error.
	e.Standby.Stop(false)
	e.Ingest(10)
	g.Eventually(e.List).WithTimeout(10 * time.Second).Should(gomega.Equal(60))
	f.followUntil(t, e.Store, 60)

	// Every change once, in the primary's order.
	var want []string
	ref, err := e.Direct.ListManagedClusterChanges(context.Background(), fleet.Identity{OrgID: "ops"}, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range ref.Items {
		want = append(want, it.Cluster.Name)
	}
	g.Expect(f.seen).To(gomega.Equal(want), "the follower's changes against the primary's feed")
}
