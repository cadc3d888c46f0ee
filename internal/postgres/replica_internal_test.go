package postgres

import (
	"errors"
	"log/slog"
	"testing"
	"time"
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
	r := &Replica{cfg: ReplicaConfig{MaxStaleness: 5 * time.Second}, replica: &DB{}, clock: clock,
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
