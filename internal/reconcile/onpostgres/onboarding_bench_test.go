package onpostgres_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
)

// The size of BenchmarkOnboardingDelivered, set with -args.
var (
	onboardRegistrations = flag.Int("onboard-registrations", 2000, "registrations BenchmarkOnboardingDelivered onboards at once")
	onboardHubs          = flag.Int("onboard-hubs", 100, "agent hubs of one zone BenchmarkOnboardingDelivered places them on")
	onboardReplicas      = flag.Int("onboard-replicas", 2, "replicas running the reconcilers in BenchmarkOnboardingDelivered")
	onboardBatchSize     = flag.Int("onboard-batch-size", 0, "--reconcile-batch-size of BenchmarkOnboardingDelivered's replicas (0: the default)")
	onboardHubSet        = flag.Int("onboard-hub-set", 3000, "registrations on the hub whose desired set BenchmarkDesiredSetOfAFullHub reads")
	onboardWorkers       = flag.Int("onboard-workers", 0, "--reconcile-workers of BenchmarkOnboardingDelivered's replicas (0: the default)")
	onboardBeatEvery     = flag.Duration("onboard-heartbeat-every", 0,
		"least time between two acknowledging heartbeats of one hub's agent in BenchmarkOnboardingDelivered (0: one after every read, as soon as it read)")
)

// BenchmarkOnboardingDelivered measures bulk onboarding: the registrations
// are committed at once (as the batch endpoint does), then replicas with the
// production reconcile defaults place and publish them on the agent hubs of
// one zone, fake agents read each new desired set and acknowledge it, and the
// clock stops when every registration is Delivered. Run it once:
//
//	go test -run '^$' -bench OnboardingDelivered -benchtime 1x ./internal/reconcile/onpostgres -args -onboard-registrations 20000
//
// It reports the seconds to placed and published, to delivered, the
// revisions the hubs went through, the time the agents spent reading
// their desired sets (Store.DesiredSet), which grows with the hub's set
// times its revisions, the longest an agent's heartbeat took to answer, and
// how long a registration created once all are published (while their
// acknowledgements are worked down) took to be Delivered; then the size of
// the registrations table against a fresh copy of it, and the share of its
// updates that were HOT.
func BenchmarkOnboardingDelivered(b *testing.B) {
	n, hubs := *onboardRegistrations, *onboardHubs
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		db := pgtest.Open(b, e.cfg)
		capacity := 2*n/hubs + 10
		for i := range hubs {
			e.hub(fmt.Sprintf("hub-%03d", i), "eu", fmt.Sprintf("eu-%d", i%3), capacity)
		}
		insertRegistrations(b, e, db, n, "eu")
		ctx, cancel := context.WithCancel(context.Background())
		agents := &fakeAgents{e: e, db: db, beatEvery: *onboardBeatEvery}
		b.StartTimer()
		start := time.Now()
		for range *onboardReplicas {
			e.startReplica(replicaOptions{cfg: benchReconcileConfig()})
		}
		var agentsDone sync.WaitGroup
		agentsDone.Go(func() { agents.run(ctx) })
		published := waitCount(b, db, n, `hub_id IS NOT NULL AND published_revision IS NOT NULL`)
		publishedAfter := time.Since(start)
		_ = published
		// A create made while the acknowledgements are worked down: how long
		// until it is Delivered, from its creation to its condition's
		// transition.
		probe := e.register("probe-during-catch-up", "eu", "")
		waitCount(b, db, n, `conditions @> '[{"type": "Delivered", "status": "True"}]'`)
		deliveredAfter := time.Since(start)
		b.StopTimer()
		delivered, _ := e.eventually(probe.ID, 5*time.Minute, cond(fleet.ConditionDelivered, fleet.ConditionTrue, ""),
			"Delivered").Conditions.Get(fleet.ConditionDelivered)
		cancel()
		agentsDone.Wait()
		b.ReportMetric(delivered.LastTransitionTime.Sub(probe.CreatedAt).Seconds(), "s-create-during-catch-up")
		var revisions int64
		if err := db.Gorm.Raw(`SELECT coalesce(sum(revision), 0) FROM hubs`).Scan(&revisions).Error; err != nil {
			b.Fatal(err)
		}
		table := registrationsTable(b, db)
		b.ReportMetric(publishedAfter.Seconds(), "s-published")
		b.ReportMetric(deliveredAfter.Seconds(), "s-delivered")
		b.ReportMetric(float64(n)/deliveredAfter.Seconds(), "delivered/s")
		b.ReportMetric(float64(revisions), "revisions")
		b.ReportMetric(time.Duration(agents.desiredNanos.Load()).Seconds(), "s-desired-sets")
		b.ReportMetric(float64(agents.desiredEntries.Load()), "desired-entries-read")
		b.ReportMetric(time.Duration(agents.heartbeatMaxNanos.Load()).Seconds(), "s-max-heartbeat")
		b.ReportMetric(table.mb, "registrations-MB")
		b.ReportMetric(table.freshMB, "registrations-fresh-MB")
		b.ReportMetric(table.hotPercent, "hot-update-%")
		b.Logf("%d registrations on %d hubs: published after %s, delivered after %s; %d revisions; %d desired-set reads of %d entries in all took %s",
			n, hubs, publishedAfter, deliveredAfter, revisions, agents.desiredReads.Load(), agents.desiredEntries.Load(),
			time.Duration(agents.desiredNanos.Load()))
		b.StartTimer()
	}
}

// benchReconcileConfig is the production configuration, with the test's
// shorter statistics interval and the sizes the flags set.
func benchReconcileConfig() reconcile.Config {
	cfg := reconcile.DefaultConfig()
	cfg.StatsInterval = time.Second
	if *onboardBatchSize > 0 {
		cfg.BatchSize = *onboardBatchSize
	}
	if *onboardWorkers > 0 {
		cfg.Workers = *onboardWorkers
	}
	return cfg
}

// tableState is what an onboarding left of the registrations table: its
// size with its indexes, the size of a freshly written copy (after VACUUM
// FULL, which rewrites the table and its indexes), and the share of its
// updates that were HOT (no index touched, no new index entries).
type tableState struct{ mb, freshMB, hotPercent float64 }

// registrationsTable reads the table's size and update counts, then
// rewrites it to measure a fresh copy. The counters are read once the
// replicas have stopped and the counts stopped moving for longer than an
// idle backend keeps its statistics before it reports them (10 s).
func registrationsTable(tb testing.TB, db *postgres.DB) tableState {
	tb.Helper()
	var st struct {
		Bytes, Upd, HotUpd float64
	}
	var changed time.Time
	gomega.NewWithT(tb).Eventually(func() (time.Duration, error) {
		last := st.Upd
		err := db.Gorm.Raw(`SELECT pg_total_relation_size('registrations') AS bytes, n_tup_upd AS upd, n_tup_hot_upd AS hot_upd
FROM pg_stat_user_tables WHERE relname = 'registrations'`).Scan(&st).Error
		if changed.IsZero() || st.Upd != last {
			changed = time.Now()
		}
		return time.Since(changed), err
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(gomega.BeNumerically(">", 11*time.Second),
		"the registrations table's update counts settling")
	if err := db.Gorm.Exec(`VACUUM FULL registrations`).Error; err != nil {
		tb.Fatal(err)
	}
	var fresh float64
	if err := db.Gorm.Raw(`SELECT pg_total_relation_size('registrations')`).Scan(&fresh).Error; err != nil {
		tb.Fatal(err)
	}
	out := tableState{mb: st.Bytes / (1 << 20), freshMB: fresh / (1 << 20)}
	if st.Upd > 0 {
		out.hotPercent = 100 * st.HotUpd / st.Upd
	}
	return out
}

// insertRegistrations commits n accepted registrations of caller's org in
// zone in one statement: copies of one made through the store, so they hold
// what a create writes.
func insertRegistrations(tb testing.TB, e *env, db *postgres.DB, n int, zone string) {
	tb.Helper()
	tmpl := e.register("template", zone, "")
	const chunk = 2000 // a statement well within the statement timeout
	for from := 1; from < n; from += chunk {
		err := db.Gorm.Exec(`INSERT INTO registrations
SELECT (jsonb_populate_record(NULL::registrations, to_jsonb(t) || jsonb_build_object(
	'id', gen_random_uuid()::text, 'name', 'c-' || i, 'region', 'eu-' || (i % 3), 'created_at', now(), 'updated_at', now(), 'next_attempt_at', now()))).*
FROM registrations t, generate_series(?::int, ?::int) i WHERE t.id = ?`, from, min(from+chunk, n)-1, tmpl.ID).Error
		if err != nil {
			tb.Fatalf("inserting registrations %d to %d: %v", from, min(from+chunk, n)-1, err)
		}
	}
}

// waitCount polls until n live registrations match where, and returns how
// many matched.
func waitCount(tb testing.TB, db *postgres.DB, n int, where string) int {
	tb.Helper()
	var got int
	gomega.NewWithT(tb).Eventually(func() (int, error) {
		err := db.Gorm.Raw(`SELECT count(*) FROM registrations WHERE deleted_at IS NULL AND ` + where).Scan(&got).Error
		return got, err
	}).WithTimeout(30*time.Minute).WithPolling(200*time.Millisecond).Should(gomega.BeNumerically(">=", n),
		"registrations matching %s", where)
	return got
}

// fakeAgents play every hub's agent: whenever a hub's revision is past what
// it applied, the agent reads its desired set (the whole set first, then the
// changes since the revision it holds), as fleetshard-sync does, and
// acknowledges the revision it read with a heartbeat.
type fakeAgents struct {
	e                                          *env
	db                                         *postgres.DB
	desiredReads, desiredEntries, desiredNanos atomic.Int64
	// heartbeatMaxNanos is the longest a heartbeat (RecordHubHeartbeat)
	// took to answer.
	heartbeatMaxNanos atomic.Int64
	// beatEvery, when set, is the least time between two heartbeats of one
	// hub's agent, as a real agent's interval spaces them: what it read in
	// between is acknowledged by the next.
	beatEvery time.Duration
	lastBeat  sync.Map
	// applied is each hub's revision its agent acknowledged: as
	// fleetshard-sync, an agent that holds a set takes the changes since.
	applied sync.Map
}

func (a *fakeAgents) run(ctx context.Context) {
	pollBehindHubs(ctx, a.db, 4, a.apply)
}

func (a *fakeAgents) apply(ctx context.Context, hubID, identity string) {
	start := time.Now()
	var (
		set fleet.DesiredSet
		err error
	)
	if since, ok := a.applied.Load(hubID); ok {
		set, err = a.e.store.DesiredChanges(ctx, hubID, identity, since.(int64))
	} else {
		set, err = a.e.store.DesiredSet(ctx, hubID, identity)
	}
	if err != nil {
		return
	}
	a.applied.Store(hubID, set.Revision)
	a.desiredNanos.Add(int64(time.Since(start)))
	a.desiredReads.Add(1)
	a.desiredEntries.Add(int64(len(set.Registrations)))
	if a.beatEvery > 0 {
		if last, ok := a.lastBeat.Load(hubID); ok && time.Since(last.(time.Time)) < a.beatEvery {
			return
		}
	}
	beat := time.Now()
	a.lastBeat.Store(hubID, beat)
	_, _ = a.e.store.RecordHubHeartbeat(ctx, hubID, identity, fleet.HubHeartbeat{AgentVersion: "bench", AppliedRevision: set.Revision})
	took := int64(time.Since(beat))
	for {
		longest := a.heartbeatMaxNanos.Load()
		if took <= longest || a.heartbeatMaxNanos.CompareAndSwap(longest, took) {
			break
		}
	}
}

// BenchmarkDesiredSetOfAFullHub measures one read of the desired set of a
// hub holding -onboard-hub-set registrations (by default a hub's share of
// the target fleet): whole, as an agent reads it at a start and at the first
// revision after each --full-set-interval, and as the delta of the 10 registrations published
// in the hub's last revision, as it reads it at every other revision (ADR
// 0017). With whole sets, onboarding N registrations in batches of B moved
// each hub about N/B times and the reads summed to about N²/(2B) entries.
//
//	go test -run '^$' -bench DesiredSetOfAFullHub ./internal/reconcile/onpostgres
func BenchmarkDesiredSetOfAFullHub(b *testing.B) {
	n := *onboardHubSet
	const changed = 10
	e := newEnv(b)
	db := pgtest.Open(b, e.cfg)
	hub := e.hub("hub-full", "eu", "eu-west-1", n+10)
	insertRegistrations(b, e, db, n, "eu")
	for _, sql := range []string{
		`UPDATE registrations SET hub_id = ?, published_revision = 1, published_generation = generation`,
		`UPDATE registrations SET published_revision = 2 WHERE id IN (SELECT id FROM registrations ORDER BY id LIMIT ` + fmt.Sprint(changed) + `) AND hub_id = ?`,
	} {
		if err := db.Gorm.Exec(sql, hub.ID).Error; err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Gorm.Exec(`UPDATE hubs SET placed_count = ?, revision = 2 WHERE id = ?`, n, hub.ID).Error; err != nil {
		b.Fatal(err)
	}
	if err := db.Gorm.Exec(`ANALYZE registrations`).Error; err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		since int64
		want  int
	}{{"whole", 0, n}, {"delta", 1, changed}} {
		b.Run(c.name, func(b *testing.B) {
			entries := 0
			for b.Loop() {
				set, err := e.store.DesiredChanges(ctx, hub.ID, hub.AgentIdentity, c.since)
				if err != nil {
					b.Fatal(err)
				}
				entries = len(set.Registrations)
			}
			if entries != c.want {
				b.Fatalf("DesiredChanges(since %d) read %d registrations, want %d", c.since, entries, c.want)
			}
			b.ReportMetric(float64(entries), "entries")
		})
	}
}

// pollBehindHubs calls agent, at most concurrency at once, for every hub
// whose revision is past what its agent acknowledged, every 20 ms until
// ctx ends: the agents of the benchmarks, which read the set and
// acknowledge it.
func pollBehindHubs(ctx context.Context, db *postgres.DB, concurrency int, agent func(ctx context.Context, hubID, identity string)) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var behind []struct{ ID, AgentIdentity string }
		if err := db.Gorm.WithContext(ctx).Raw(`SELECT id, agent_identity FROM hubs WHERE revision > applied_revision AND deleted_at IS NULL`).
			Scan(&behind).Error; err != nil {
			continue
		}
		sem := make(chan struct{}, concurrency)
		var wg sync.WaitGroup
		for _, h := range behind {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				agent(ctx, h.ID, h.AgentIdentity)
			})
		}
		wg.Wait()
	}
}
