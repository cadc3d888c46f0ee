package readreplica

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// replicaClock is a clock the test moves.
type replicaClock struct{ now time.Time }

func (c *replicaClock) Now() time.Time { return c.now }

// TestReplicaStalenessFromSamples checks the monitor's bound: now minus the
// time of the newest primary sample the replica has replayed, unknown while
// none is or the replica has a problem.
func TestReplicaStalenessFromSamples(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	clock := &replicaClock{now: start}
	r := &Replica{cfg: Config{MaxStaleness: 5 * time.Second}, replica: &postgres.DB{}, clock: clock,
		logger: slog.New(slog.DiscardHandler), problem: "no sample yet"}
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	check := func(step string, want time.Duration, wantKnown bool) {
		t.Helper()
		if got, known := r.Staleness(); known != wantKnown || (known && got != want) {
			t.Errorf("%s: Staleness() = %s, %v; want %s, %v", step, got, known, want, wantKnown)
		}
	}

	r.record(walSample{at: at(0), lsn: 100}, 50, "", nil)
	clock.now = at(0.5)
	check("nothing replayed yet", 0, false)

	r.record(walSample{at: at(1), lsn: 200}, 150, "", nil)
	clock.now = at(1.5)
	check("replayed the first sample", 1500*time.Millisecond, true)

	// Idle primary: the same position, replayed; the newest sample counts.
	r.record(walSample{at: at(2), lsn: 200}, 200, "", nil)
	clock.now = at(2.25)
	check("replayed both", 250*time.Millisecond, true)

	// Replay stops: the bound grows with the clock alone.
	r.record(walSample{at: at(3), lsn: 300}, 200, "", nil)
	r.record(walSample{at: at(4), lsn: 400}, 200, "", nil)
	clock.now = at(9)
	check("replay stopped", 7*time.Second, true)
	if _, ok := r.fresh(); ok {
		t.Errorf("fresh() past the bound = true, want false")
	}

	// Down: unknown, whatever was covered.
	r.record(walSample{at: at(9), lsn: 500}, 0, "unreachable", errors.New("connection refused"))
	check("unreachable", 0, false)

	// Back, having replayed the sample at 4 but not the one at 9.
	r.record(walSample{at: at(10), lsn: 600}, 450, "", nil)
	clock.now = at(10)
	check("back, behind", 6*time.Second, true)
	if len(r.samples) != 2 {
		t.Errorf("samples kept = %d, want 2 (at 9 and 10; the older ones replayed or past the bound)", len(r.samples))
	}
}

// TestReplicaWithoutHostReadsThePrimary checks the replica without
// --db-read-replica-host: not serving, as a nil one is not, every read on the
// primary's pool and counted there.
func TestReplicaWithoutHostReadsThePrimary(t *testing.T) {
	t.Parallel()
	if (*Replica)(nil).Serving() {
		t.Errorf("a nil Replica is serving")
	}
	primary := &postgres.DB{}
	reg := prometheus.NewRegistry()
	r, err := New(DefaultConfig(), postgres.DefaultConfig(), primary, &replicaClock{}, slog.New(slog.DiscardHandler), "fm", reg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if r.Serving() {
		t.Errorf("a Replica without a host is serving")
	}
	var got *postgres.DB
	if err := r.Read(context.Background(), "user_metrics", func(db *postgres.DB) error { got = db; return nil }); err != nil {
		t.Fatalf("Read() = %v", err)
	}
	if got != primary {
		t.Errorf("Read() ran on %p, want the primary %p", got, primary)
	}
	if n := testutil.ToFloat64(r.reads.WithLabelValues("user_metrics", targetPrimary)); n != 1 {
		t.Errorf("reads on the primary = %v, want 1", n)
	}
	if n, err := testutil.GatherAndCount(reg, "fm_db_replica_staleness_seconds"); err != nil || n != 0 {
		t.Errorf("staleness gauges registered = %d, %v; want none without a replica", n, err)
	}
}
