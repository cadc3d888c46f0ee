package postgres_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica/readreplicatest"
)

// The store's reads on a streaming standby that a read replica serves
// (readreplica; docs/database-read-replicas.md): what the change feed reads
// there and hands out.

// TestFeedBoundOnAStandbyStaysBelowARunningTransaction checks the change
// feed's bound read on a standby: a transaction the primary still runs holds
// it back, although the standby has replayed a later one's commit. Its
// snapshot's xmax, the primary's bound without its sessions, would pass it,
// and the rows that transaction commits later would fall behind a cursor
// already handed out.
func TestFeedBoundOnAStandbyStaysBelowARunningTransaction(t *testing.T) {
	t.Parallel()
	e := readreplicatest.New(t, readreplicatest.ShortBound, authz.MustDefault())
	ctx := context.Background()
	g := gomega.NewWithT(t)
	standby := e.StandbyDB()

	running := e.DB.Gorm.Begin()
	t.Cleanup(func() { running.Rollback() })
	var xid string
	if err := running.Raw("SELECT pg_current_xact_id()::text").Scan(&xid).Error; err != nil {
		t.Fatal(err)
	}
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	e.Ingest(1) // a later transaction commits
	g.Eventually(func() (int64, error) {
		var n int64
		return n, standby.Gorm.Raw("SELECT count(*) FROM managed_clusters").Scan(&n).Error
	}).WithTimeout(20*time.Second).Should(gomega.Equal(int64(1)), "the later commit replayed on the standby")
	bound, err := postgres.FeedBoundForTest(ctx, standby)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(bound).To(gomega.BeNumerically("<=", x), "the standby's bound with transaction %d running on the primary", x)

	if err := running.Commit().Error; err != nil {
		t.Fatal(err)
	}
	e.Ingest(1)
	g.Eventually(func() (uint64, error) { return postgres.FeedBoundForTest(ctx, standby) }).
		WithTimeout(20*time.Second).Should(gomega.BeNumerically(">", x), "the standby's bound once the transaction ended")
}

// TestReplicaFeedWaitsForTheCursorsWALPosition checks that a fresh replica
// does not answer a feed read from a cursor whose reader saw more than the
// replica has replayed, and does answer one it has replayed.
func TestReplicaFeedWaitsForTheCursorsWALPosition(t *testing.T) {
	t.Parallel()
	// A bound the test never reaches: the replica stays fresh while paused.
	e := readreplicatest.New(t, time.Hour, authz.MustDefault())
	ctx := context.Background()
	g := gomega.NewWithT(t)
	admin := fleet.Identity{OrgID: "ops"}
	e.Ingest(20)
	e.ReplicaAnswers(20)

	e.StandbySQL("SELECT pg_wal_replay_pause()")
	e.Ingest(5)
	// The primary's list hands out its WAL position, past the replica's.
	page, err := postgres.ListManagedClustersOnPrimaryForTest(ctx, e.Store, admin, true, fleet.ListQuery{Size: 500})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(page.Items).To(gomega.HaveLen(25))
	_, lsn, err := postgres.CursorLSNForTest(page.Cursor, 0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lsn).To(gomega.BeNumerically(">", 0), "the list's cursor carries the primary's WAL position")

	// From the start of the feed with that position: the replica holds a
	// full page, but not all that reader saw; the primary answers.
	ahead, _, err := postgres.CursorLSNForTest(postgres.CursorForTest(0, 0), lsn)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	behind := func() float64 {
		return e.Counter("fm_db_replica_fallbacks_total", map[string]string{"read": "inventory_feed", "reason": "behind_cursor"})
	}
	got, err := e.Store.ListManagedClusterChanges(ctx, admin, true, ahead, 5)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.Items).To(gomega.HaveLen(5))
	g.Expect(behind()).To(gomega.Equal(1.0), "feed reads the replica refused as behind the cursor")
	next, was, err := postgres.CursorLSNForTest(got.Cursor, 0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(was).To(gomega.BeNumerically(">=", lsn), "the next cursor keeps the position")

	// The same position without the WAL position, as cursors before it
	// were: the replica answers.
	replicaBefore := e.Reads("inventory_feed", "replica")
	_, err = e.Store.ListManagedClusterChanges(ctx, admin, true, next, 5)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(e.Reads("inventory_feed", "replica")).To(gomega.Equal(replicaBefore + 1))
	g.Expect(behind()).To(gomega.Equal(1.0))

	// Resumed, the replica catches up with the position and answers it.
	e.StandbySQL("SELECT pg_wal_replay_resume()")
	g.Eventually(func() float64 {
		_, err := e.Store.ListManagedClusterChanges(ctx, admin, true, ahead, 5)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return e.Reads("inventory_feed", "replica")
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(gomega.BeNumerically(">", replicaBefore+1))
}
