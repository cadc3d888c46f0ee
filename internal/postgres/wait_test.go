package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestWaitBoundCutsAFrozenServer: on a frozen server (SIGSTOP: nothing
// answers, not even a cancel request), a call whose context asks for the
// wait bound fails as Unavailable within --db-wait-timeout on every path, and
// the connection it cut is closed, not put back in the pool; a call that does
// not ask keeps its own deadline. After the thaw the pool answers again.
func TestWaitBoundCutsAFrozenServer(t *testing.T) {
	t.Parallel()
	server := pgtest.StartServer(t)
	cfg := server.NewDatabase(t, "wait")
	cfg.WaitTimeout = 500 * time.Millisecond
	// One idle connection at most: after a cut, none may be left open.
	cfg.MaxOpenConns, cfg.MaxIdleConns = 2, 1
	db := pgtest.Open(t, cfg)
	bounded := fleet.NewContextWithBoundedDatabaseWait(context.Background())
	margin := time.Second
	paths := queryPaths("SELECT 1")
	for name, run := range paths {
		if err := run(bounded, db); err != nil {
			t.Fatalf("%s before the freeze: %v", name, err)
		}
	}
	if stats := db.SQL().Stats(); stats.Idle != 1 {
		t.Fatalf("pool before the freeze: %+v, want one idle connection, which the first call reuses", stats)
	}

	server.Freeze()
	t.Cleanup(server.Thaw) // a failed assertion leaves no stopped processes behind
	// Each path twice: the first call on a frozen server reuses the pooled
	// connection (its statement is cut), later ones open one (the connect is cut).
	for name, run := range paths {
		for range 2 {
			// Past this the call is held as it was before the bound: by the freeze.
			ctx, cancel := context.WithTimeout(bounded, cfg.WaitTimeout+4*margin)
			start := time.Now()
			err := run(ctx, db)
			elapsed := time.Since(start)
			cancel()
			if code := fleet.ErrorCodeOf(err); code != fleet.CodeUnavailable || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a frozen server = %v (code %d), want CodeUnavailable from the wait bound", name, err, code)
			}
			if elapsed > cfg.WaitTimeout+margin {
				t.Errorf("%s on a frozen server took %s, want within --db-wait-timeout %s and %s", name, elapsed, cfg.WaitTimeout, margin)
			}
			if stats := db.SQL().Stats(); stats.OpenConnections != 0 {
				t.Errorf("pool after %s on a frozen server: %+v, want the cut connection closed, not pooled", name, stats)
			}
		}
	}

	// Without the bound (a reconciler, a long-poll) a call waits for its own deadline.
	own := 2 * cfg.WaitTimeout
	ctx, cancel := context.WithTimeout(context.Background(), own)
	start := time.Now()
	err := paths["gorm"](ctx, db)
	elapsed := time.Since(start)
	cancel()
	if code := fleet.ErrorCodeOf(err); code != fleet.CodeUnavailable || elapsed < own {
		t.Errorf("an unbounded call on a frozen server = %v (code %d) after %s, want CodeUnavailable at its own deadline %s", err, code, elapsed, own)
	}

	server.Thaw()
	for name, run := range paths {
		if err := run(bounded, db); err != nil {
			t.Errorf("%s after the thaw: %v", name, err)
		}
	}
}
