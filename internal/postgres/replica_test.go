package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// replicaEnv is a primary with a migrated database, a streaming standby of
// it, and two stores on the primary: one reading through the replica, one
// without (the reference).
type replicaEnv struct {
	t        testing.TB
	primary  *pgtest.Server
	standby  *pgtest.Server
	db       *postgres.DB
	dbName   string
	reg      *prometheus.Registry
	replica  *postgres.Replica
	store    *postgres.Store
	direct   *postgres.Store
	hub      fleet.Hub
	bound    time.Duration
	ingested int
}

// replicaBound is the test's --db-read-max-staleness: short, so that the
// switch to the primary is seen quickly, yet well above the check interval.
const replicaBound = 2 * time.Second

func newReplicaEnv(t testing.TB, bound time.Duration) *replicaEnv {
	t.Helper()
	ctx := context.Background()
	e := &replicaEnv{t: t, dbName: "fleet_replica", reg: prometheus.NewRegistry(), bound: bound}
	e.primary = pgtest.StartServer(t)
	cfg := e.primary.NewDatabase(t, e.dbName)
	db := pgtest.Open(t, cfg)
	e.db = db
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(): %v", err)
	}
	e.standby = pgtest.StartServerWith(t, pgtest.ServerOptions{
		Init: func(s *pgtest.Server, dir string) error {
			out, err := s.Command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(e.primary.Port()), "-U", "postgres",
				"-D", dir, "-R", "-X", "stream", "-c", "fast").CombinedOutput()
			if err != nil {
				return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
			}
			return nil
		},
		// A long read on the standby is not cancelled by the replay of a
		// vacuum on the primary.
		Settings: []string{"hot_standby_feedback=on"},
	})
	var err error
	e.replica, err = postgres.NewReplica(postgres.ReplicaConfig{Host: "127.0.0.1", Port: e.standby.Port(), MaxStaleness: e.bound,
		CheckInterval: 100 * time.Millisecond}, cfg, db, fleet.SystemClock{}, slog.New(slog.DiscardHandler), "fm", e.reg)
	if err != nil {
		t.Fatalf("NewReplica(): %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.replica.Run(runCtx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); _ = e.replica.Close() })

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyring, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	e.direct = postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	e.store = e.direct.WithReplica(e.replica)
	e.hub, err = e.direct.CreateHub(ctx, fleet.HubCreate{Name: "hub-1", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ingest adds n new clusters to the inventory, one batch.
func (e *replicaEnv) ingest(n int) {
	e.t.Helper()
	var b fleet.InventoryBatch
	for range n {
		b.Upserts = append(b.Upserts, cluster(fmt.Sprintf("c%03d", e.ingested), "4.16"))
		e.ingested++
	}
	if _, err := e.direct.IngestInventory(context.Background(), e.hub.ID, "agent-1", b); err != nil {
		e.t.Fatalf("IngestInventory(): %v", err)
	}
}

// standbyDB opens a pool on the standby's copy of the database.
func (e *replicaEnv) standbyDB() *postgres.DB {
	e.t.Helper()
	cfg := e.standby.Config()
	cfg.Name = e.dbName
	return pgtest.Open(e.t, cfg)
}

// standbySQL runs a statement on the standby's copy of the database.
func (e *replicaEnv) standbySQL(sql string) {
	e.t.Helper()
	db := e.standbyDB()
	defer db.Close()
	if err := db.Gorm.Exec(sql).Error; err != nil {
		e.t.Fatalf("standby: %s: %v", sql, err)
	}
}

// counter is the value of the counter name with labels, 0 when absent.
func (e *replicaEnv) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func (e *replicaEnv) reads(read, target string) float64 {
	return e.counter("fm_db_reads_total", map[string]string{"read": read, "target": target})
}

// list reads the whole inventory as an administrator.
func (e *replicaEnv) list() int {
	e.t.Helper()
	page, err := e.store.ListManagedClusters(context.Background(), fleet.Identity{OrgID: "ops"}, true, fleet.ListQuery{Size: 500})
	if err != nil {
		e.t.Fatalf("ListManagedClusters(): %v", err)
	}
	return len(page.Items)
}

// replicaAnswers waits until the standby answers a list with n clusters.
func (e *replicaEnv) replicaAnswers(n int) {
	e.t.Helper()
	gomega.NewWithT(e.t).Eventually(func(g gomega.Gomega) {
		// One read at a time: the counter moves by this read only.
		before := e.reads("inventory_list", "replica")
		g.Expect(e.list()).To(gomega.Equal(n))
		g.Expect(e.reads("inventory_list", "replica")).To(gomega.BeNumerically(">", before), "a list read served by the standby")
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(gomega.Succeed())
}

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
	e := newReplicaEnv(t, replicaBound)
	g := gomega.NewWithT(t)
	var f follower

	// Fresh: the standby answers the list and the feed's full pages.
	e.ingest(30)
	e.replicaAnswers(30)
	f.followUntil(t, e.store, 30)
	g.Expect(e.reads("inventory_feed", "replica")).To(gomega.BeNumerically(">", 0), "feed pages served by the standby")

	// Paused: a read never misses a write older than the bound, and once
	// the bound has passed the reads stay on the primary.
	e.standbySQL("SELECT pg_wal_replay_pause()")
	e.ingest(10)
	wrote := time.Now()
	primaryBefore := e.reads("inventory_list", "primary")
	g.Eventually(func(g gomega.Gomega) {
		start := time.Now()
		n := e.list()
		if since := start.Sub(wrote); since > e.bound && n != 40 {
			t.Errorf("ListManagedClusters() %s after the write, past the bound %s = %d clusters, want 40", since, e.bound, n)
		}
		g.Expect(n).To(gomega.Equal(40))
	}).WithTimeout(4 * e.bound).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(e.reads("inventory_list", "primary")).To(gomega.BeNumerically(">", primaryBefore), "list reads on the primary")
	g.Expect(e.counter("fm_db_replica_fallbacks_total", map[string]string{"read": "inventory_list", "reason": "stale"})).
		To(gomega.BeNumerically(">", 0))
	g.Expect(e.counter("fm_db_replica_staleness_seconds", nil)).To(gomega.BeNumerically(">", e.bound.Seconds()))
	f.followUntil(t, e.store, 40)

	// Resumed: the standby catches up and serves again.
	e.standbySQL("SELECT pg_wal_replay_resume()")
	e.ingest(10)
	feedBefore := e.reads("inventory_feed", "replica")
	e.replicaAnswers(50)
	f.followUntil(t, e.store, 50)
	g.Expect(e.reads("inventory_feed", "replica")).To(gomega.BeNumerically(">", feedBefore), "feed pages served by the standby again")

	// Down: the reads go to the primary, never an error.
	e.standby.Stop(false)
	e.ingest(10)
	g.Eventually(e.list).WithTimeout(10 * time.Second).Should(gomega.Equal(60))
	f.followUntil(t, e.store, 60)

	// Every change once, in the primary's order.
	var want []string
	ref, err := e.direct.ListManagedClusterChanges(context.Background(), fleet.Identity{OrgID: "ops"}, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range ref.Items {
		want = append(want, it.Cluster.Name)
	}
	g.Expect(f.seen).To(gomega.Equal(want), "the follower's changes against the primary's feed")
}

// TestFeedBoundOnAStandbyStaysBelowARunningTransaction checks the change
// feed's bound read on a standby: a transaction the primary still runs holds
// it back, although the standby has replayed a later one's commit. Its
// snapshot's xmax, the primary's bound without its sessions, would pass it,
// and the rows that transaction commits later would fall behind a cursor
// already handed out.
func TestFeedBoundOnAStandbyStaysBelowARunningTransaction(t *testing.T) {
	t.Parallel()
	e := newReplicaEnv(t, replicaBound)
	ctx := context.Background()
	g := gomega.NewWithT(t)
	standby := e.standbyDB()

	running := e.db.Gorm.Begin()
	t.Cleanup(func() { running.Rollback() })
	var xid string
	if err := running.Raw("SELECT pg_current_xact_id()::text").Scan(&xid).Error; err != nil {
		t.Fatal(err)
	}
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	e.ingest(1) // a later transaction commits
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
	e.ingest(1)
	g.Eventually(func() (uint64, error) { return postgres.FeedBoundForTest(ctx, standby) }).
		WithTimeout(20*time.Second).Should(gomega.BeNumerically(">", x), "the standby's bound once the transaction ended")
}

// TestReplicaFeedWaitsForTheCursorsWALPosition checks that a fresh replica
// does not answer a feed read from a cursor whose reader saw more than the
// replica has replayed, and does answer one it has replayed.
func TestReplicaFeedWaitsForTheCursorsWALPosition(t *testing.T) {
	t.Parallel()
	// A bound the test never reaches: the replica stays fresh while paused.
	e := newReplicaEnv(t, time.Hour)
	ctx := context.Background()
	g := gomega.NewWithT(t)
	admin := fleet.Identity{OrgID: "ops"}
	e.ingest(20)
	e.replicaAnswers(20)

	e.standbySQL("SELECT pg_wal_replay_pause()")
	e.ingest(5)
	// The primary's list hands out its WAL position, past the replica's.
	page, err := postgres.ListManagedClustersOnPrimaryForTest(ctx, e.store, admin, true, fleet.ListQuery{Size: 500})
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
		return e.counter("fm_db_replica_fallbacks_total", map[string]string{"read": "inventory_feed", "reason": "behind_cursor"})
	}
	got, err := e.store.ListManagedClusterChanges(ctx, admin, true, ahead, 5)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.Items).To(gomega.HaveLen(5))
	g.Expect(behind()).To(gomega.Equal(1.0), "feed reads the replica refused as behind the cursor")
	next, was, err := postgres.CursorLSNForTest(got.Cursor, 0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(was).To(gomega.BeNumerically(">=", lsn), "the next cursor keeps the position")

	// The same position without the WAL position, as cursors before it
	// were: the replica answers.
	replicaBefore := e.reads("inventory_feed", "replica")
	_, err = e.store.ListManagedClusterChanges(ctx, admin, true, next, 5)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(e.reads("inventory_feed", "replica")).To(gomega.Equal(replicaBefore + 1))
	g.Expect(behind()).To(gomega.Equal(1.0))

	// Resumed, the replica catches up with the position and answers it.
	e.standbySQL("SELECT pg_wal_replay_resume()")
	g.Eventually(func() float64 {
		_, err := e.store.ListManagedClusterChanges(ctx, admin, true, ahead, 5)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return e.reads("inventory_feed", "replica")
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(gomega.BeNumerically(">", replicaBefore+1))
}
