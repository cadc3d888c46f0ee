package reconcile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// unavailable is the error a step gets when its statement is cut short.
func unavailable(op string) error {
	return fleet.Errorf(fleet.CodeUnavailable, "%s: the database is unavailable; retry later", op)
}

// claimsFailing is a queue whose claims fail; stop, when set, is called
// first, as a shutdown cancelling the pass does, and the claim is then cut
// short (unavailability, which a running pass would wait out instead).
type claimsFailing struct {
	fleet.RegistrationQueue
	stop func()
}

func (claimsFailing) WakeAcknowledged(context.Context, int) (int, bool, error) { return 0, false, nil }

func (q claimsFailing) ClaimRegistrations(context.Context, fleet.WorkKind, string, int, time.Duration) ([]fleet.Claim, error) {
	if q.stop != nil {
		q.stop()
		return nil, unavailable("ClaimRegistrations()")
	}
	return nil, errors.New("ClaimRegistrations(): the statement failed")
}

// housekeepingFailing fails both steps, and calls stop at the start of the
// step named by stopAt.
type housekeepingFailing struct {
	stopAt string
	stop   func()
}

func (h housekeepingFailing) Stats(context.Context) (fleet.FleetStats, error) {
	if h.stopAt == "stats" {
		h.stop()
	}
	return fleet.FleetStats{}, unavailable("Stats()")
}

func (h housekeepingFailing) PurgeIdempotencyKeys(context.Context) (int, error) {
	if h.stopAt == "purge" {
		h.stop()
	}
	return 0, unavailable("PurgeIdempotencyKeys()")
}

// TestFailuresOfAStoppingPassAreNotErrors checks that a step failing because
// the reconcilers are stopping logs no error, while the same failure in a
// running pass does.
func TestFailuresOfAStoppingPassAreNotErrors(t *testing.T) {
	t.Parallel()
	metrics, err := NewMetrics("stopping_test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	claim := func(stopping bool) func(context.Context, context.CancelFunc, *slog.Logger) {
		return func(ctx context.Context, cancel context.CancelFunc, logger *slog.Logger) {
			q := claimsFailing{}
			if stopping {
				q.stop = cancel
			}
			w := &registrationWorker{name: "provisioning_mgr", kind: fleet.WorkProvision, queue: q, cfg: DefaultConfig(), logger: logger, metrics: metrics}
			w.pass(ctx)
		}
	}
	housekeeping := func(stopAt string) func(context.Context, context.CancelFunc, *slog.Logger) {
		return func(ctx context.Context, cancel context.CancelFunc, logger *slog.Logger) {
			RunHousekeeping(ctx, DefaultConfig(), housekeepingFailing{stopAt: stopAt, stop: cancel}, metrics, logger)
		}
	}
	for _, tt := range []struct {
		name string
		run  func(context.Context, context.CancelFunc, *slog.Logger)
		want []string
	}{
		{"claiming registrations while running", claim(false), []string{`msg="claiming registrations"`}},
		{"claiming registrations while stopping", claim(true), nil},
		// The stats fail while running; the purge, stopped, fails after.
		{"housekeeping stopped at the purge", housekeeping("purge"), []string{`msg="reading fleet stats"`}},
		{"housekeeping stopped at the stats", housekeeping("stats"), nil},
	} {
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tt.run(ctx, cancel, slog.New(slog.NewTextHandler(&logs, nil)))
		cancel()
		var got []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=ERROR") {
				got = append(got, strings.TrimSpace(line))
			}
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: logged errors %q, want %d (%q)", tt.name, got, len(tt.want), tt.want)
			continue
		}
		for i, want := range tt.want {
			if !strings.Contains(got[i], want) {
				t.Errorf("%s: logged error %q, want %s", tt.name, got[i], want)
			}
		}
	}
}
