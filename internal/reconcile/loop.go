package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// pass is one round of a reconciler. It returns how soon it wants to run
// again (0: as soon as possible, because it left work behind) and whether it
// has a wish at all; without one the loop waits for a wake-up or the resync.
type pass func(ctx context.Context) (again time.Duration, wish bool)

// loop runs p at start, on every wake-up, when p asked for it, and at least
// every resync. Waking is level-triggered: a wake-up carries no data, the pass
// reads the database. name is the reconciler's, which its passes' statements
// name to the database (fleet.NewContextWithOperation).
func loop(ctx context.Context, name string, wake <-chan string, resync time.Duration, p pass) {
	ctx = fleet.NewContextWithOperation(ctx, name)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
		again, wish := p(ctx)
		if ctx.Err() != nil {
			return
		}
		next := resync
		if wish && again < next {
			next = again
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// unavailableRetry is how often work that failed because the database could
// not be reached is tried again: a try a stopped server refuses costs
// nothing, and the work goes on within this of the database's return.
const unavailableRetry = 500 * time.Millisecond

// untilAnswered runs try until it ends in anything but unavailability
// (fleet.CodeUnavailable: the database lost, restarting, frozen), or ctx
// ends, trying again every unavailableRetry. Work that lost its connection
// so waits for the database instead of failing and backing off: an outage
// is not the work's failure. try must be idempotent, as every step of a
// level-triggered pass is.
func untilAnswered[T any](ctx context.Context, try func(context.Context) (T, error)) (T, error) {
	for {
		v, err := try(ctx)
		if err == nil || fleet.ErrorCodeOf(err) != fleet.CodeUnavailable || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(unavailableRetry):
		}
	}
}

// NewOwner returns a claim owner id unique to this process: host, pid and a
// random suffix, so the queue tells replicas apart.
func NewOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// logPanic keeps one object's panic from ending the reconciler.
func logPanic(logger *slog.Logger, what string) {
	if p := recover(); p != nil {
		logger.Error("reconcile panicked", "object", what, "panic", p)
	}
}

// logFailure logs a step's failure as an error, unless ctx ended: a step
// cut by the reconciler's own stop (serve shutting down) is no failure.
func logFailure(ctx context.Context, logger *slog.Logger, msg string, err error, attrs ...any) {
	if ctx.Err() == nil {
		logger.Error(msg, append(attrs, errAttrs(err))...)
	}
}

// errAttrs is err for the log: its text, and the cause a service error keeps
// from its callers when it keeps one (fleet.Cause), so that a database's
// unavailability says whether it was a timeout, a lock or a lost connection.
// The attributes are inlined, as "error" and "cause".
func errAttrs(err error) slog.Attr {
	if cause := fleet.Cause(err); cause != err {
		return slog.Group("", slog.Any("error", err), slog.Any("cause", cause))
	}
	return slog.Any("error", err)
}
