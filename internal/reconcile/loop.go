package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// pass is one round of a reconciler. It returns how soon it wants to run
// again (0: as soon as possible, because it left work behind) and whether it
// has a wish at all; without one the loop waits for a wake-up or the resync.
type pass func(ctx context.Context) (again time.Duration, wish bool)

// loop runs p at start, on every wake-up, when p asked for it, and at least
// every resync. Waking is level-triggered: a wake-up carries no data, the pass
// reads the database.
func loop(ctx context.Context, wake <-chan string, resync time.Duration, p pass) {
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
