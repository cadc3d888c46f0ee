package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// readyWindow is how many heartbeat intervals an exchange with the fleet
// manager, and one with the hub, count as recent enough to be ready.
const readyWindow = 3

// liveness remembers the last successful exchange with each side.
type liveness struct {
	fleet atomic.Int64 // unix nanoseconds
	hub   atomic.Int64
}

func (l *liveness) fleetOK(now time.Time) { l.fleet.Store(now.UnixNano()) }
func (l *liveness) hubOK(now time.Time)   { l.hub.Store(now.UnixNano()) }

// check returns an error naming the side not heard from within window.
func (l *liveness) check(now time.Time, window time.Duration) error {
	for _, side := range []struct {
		name string
		at   int64
	}{{"the fleet manager", l.fleet.Load()}, {"the hub", l.hub.Load()}} {
		if side.at == 0 {
			return fmt.Errorf("no successful exchange with %s yet", side.name)
		}
		if last := time.Unix(0, side.at); now.Sub(last) > window {
			return fmt.Errorf("no successful exchange with %s since %s", side.name, last.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// Ready reports whether the agent holds the hub's lease and exchanged
// successfully with the fleet manager and with the hub within the last three
// heartbeat intervals; it serves the readiness probe.
func (a *Agent) Ready(context.Context) error {
	if !a.leading.Load() {
		return errors.New("waiting for the hub's lease")
	}
	return a.live.check(a.clock.Now(), readyWindow*a.cfg.HeartbeatInterval)
}
