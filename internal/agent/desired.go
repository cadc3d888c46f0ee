package agent

import (
	"context"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// runDesired long-polls the fleet manager for the hub's desired set and
// applies each new one, until ctx ends. A revision counts as applied only
// once the whole set is: then a heartbeat tells the fleet manager at once.
// Errors are retried with backoff: a failed pass polls again from the last
// applied revision, so it gets the newest set at once.
func (a *Agent) runDesired(ctx context.Context) {
	b := newBackoff()
	for ctx.Err() == nil {
		after := a.applied.Load()
		set, err := a.fleet.GetHubDesired(ctx, after, a.cfg.PollWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.logger.Warn("desired set not fetched, will retry", "error", err, "after", after)
			sleep(ctx, b.next())
			continue
		}
		a.live.fleetOK(a.clock.Now())
		if set == nil {
			b.reset()
			continue
		}
		if err := a.apply(ctx, set); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.logger.Error("desired set not applied, will retry", "error", err, "revision", set.Revision)
			if a.lastPass.record(set.Revision, err, a.clock.Now()) {
				a.heartbeatSoon()
			}
			sleep(ctx, b.next())
			continue
		}
		b.reset()
		a.applied.Store(set.Revision)
		a.metrics.appliedRevision.Set(float64(set.Revision))
		a.lastPass.record(set.Revision, nil, a.clock.Now())
		a.heartbeatSoon()
	}
}

// heartbeatSoon asks the heartbeat loop to report now: a new revision was
// applied, or a pass started or stopped failing.
func (a *Agent) heartbeatSoon() {
	select {
	case a.heartbeatNow <- struct{}{}:
	default:
	}
}

// apply applies one desired set and records the pass.
func (a *Agent) apply(ctx context.Context, set *private.DesiredSet) error {
	objects := 0
	for _, r := range set.Registrations {
		objects += len(r.Objects)
	}
	for _, p := range desiredPolicies(set) {
		objects += len(p.Objects)
	}
	a.metrics.desiredObjects.Set(float64(objects))
	start := time.Now()
	err := a.applier.applySet(ctx, set)
	a.metrics.observeApply(err, time.Since(start))
	if err != nil {
		return err
	}
	a.live.hubOK(a.clock.Now())
	a.logger.Info("desired set applied", "revision", set.Revision, "registrations", len(set.Registrations), "policies", len(desiredPolicies(set)), "objects", objects, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}
