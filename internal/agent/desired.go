package agent

import (
	"context"
	"slices"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// runDesired long-polls the fleet manager for the hub's desired set and
// applies each new one, until ctx ends. A pass acknowledges its revision
// when it applied every entry it could: an entry the hub refuses (or whose
// objects cannot be read) fails alone and is reported with the next
// heartbeat, sent at once. A pass that failed as a whole (the hub
// unreachable, say) is retried with backoff from the last applied revision,
// so it gets the newest set at once. While entries of the applied set fail,
// the long-poll waits no longer than the backoff, and when nothing new came
// the failed entries are tried again.
func (a *Agent) runDesired(ctx context.Context) {
	b := newBackoff()
	var held *private.DesiredSet // the applied set, while some of its entries fail
	for ctx.Err() == nil {
		after := a.applied.Load()
		wait := a.cfg.PollWait
		if held != nil && held.Revision == after {
			wait = min(wait, b.next())
		}
		set, err := a.fleet.GetHubDesired(ctx, after, wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.logger.Warn("desired set not fetched, will retry", "error", err, "after", after)
			sleep(ctx, b.after(err))
			continue
		}
		a.live.fleetOK(a.clock.Now())
		if set == nil {
			if held == nil || held.Revision != after {
				held = nil
				b.reset()
				continue
			}
			set = held
			if !a.retryFailed(ctx, set) {
				continue
			}
		} else if !a.applyAndRecord(ctx, set, b) {
			continue
		}
		held = nil
		if f, _ := a.lastPass.acknowledgedFailures(set.Revision); len(f) > 0 {
			held = set
			continue
		}
		b.reset()
	}
}

// applyAndRecord applies a new set; it reports false when the pass failed
// as a whole (after its backoff), true when it acknowledged the revision.
func (a *Agent) applyAndRecord(ctx context.Context, set *private.DesiredSet, b *backoff) bool {
	failures, err := a.apply(ctx, set)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		a.logger.Error("desired set not applied, will retry", "error", err, "revision", set.Revision)
		if a.lastPass.record(set.Revision, err, failures, a.clock.Now()) {
			a.heartbeatSoon()
		}
		sleep(ctx, b.next())
		return false
	}
	a.applied.Store(set.Revision)
	a.metrics.appliedRevision.Set(float64(set.Revision))
	a.metrics.failedEntries.Set(float64(len(failures)))
	a.lastPass.record(set.Revision, nil, failures, a.clock.Now())
	a.heartbeatSoon()
	return true
}

// retryFailed applies the failed entries of the applied set again; it
// reports true when it knows their outcome (the heartbeat then says it,
// when it changed).
func (a *Agent) retryFailed(ctx context.Context, set *private.DesiredSet) bool {
	before, _ := a.lastPass.acknowledgedFailures(set.Revision)
	failures, err := a.applier.retryFailed(ctx, set, before)
	if err != nil {
		if ctx.Err() == nil {
			a.logger.Warn("failed entries not retried, will retry", "error", err, "revision", set.Revision)
		}
		return false
	}
	a.metrics.failedEntries.Set(float64(len(failures)))
	a.lastPass.record(set.Revision, nil, failures, a.clock.Now())
	if !slices.EqualFunc(before, failures, sameFailure) {
		a.logger.Info("failed entries retried", "revision", set.Revision, "failed_before", len(before), "failed_now", len(failures))
		a.heartbeatSoon()
	}
	return true
}

func sameFailure(x, y private.EntryFailure) bool {
	return ptrValue(x.RegistrationId) == ptrValue(y.RegistrationId) && ptrValue(x.PolicyId) == ptrValue(y.PolicyId) &&
		x.Reason == y.Reason && x.Message == y.Message
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// heartbeatSoon asks the heartbeat loop to report now: a new revision was
// applied, or a pass started or stopped failing.
func (a *Agent) heartbeatSoon() {
	select {
	case a.heartbeatNow <- struct{}{}:
	default:
	}
}

// apply applies one desired set and records the pass: the entry failures,
// and err when the pass failed as a whole.
func (a *Agent) apply(ctx context.Context, set *private.DesiredSet) ([]private.EntryFailure, error) {
	objects := 0
	for _, r := range set.Registrations {
		objects += len(r.Objects)
	}
	for _, p := range desiredPolicies(set) {
		objects += len(p.Objects)
	}
	a.metrics.desiredObjects.Set(float64(objects))
	start := time.Now()
	failures, err := a.applier.applySet(ctx, set)
	a.metrics.observeApply(err, time.Since(start))
	if err != nil {
		return failures, err
	}
	a.live.hubOK(a.clock.Now())
	if len(failures) > 0 {
		a.logger.Warn("desired set applied but for some entries, each failed alone", "revision", set.Revision, "failed", len(failures),
			"entries", describeFailures(failures))
	}
	a.logger.Info("desired set applied", "revision", set.Revision, "registrations", len(set.Registrations), "policies", len(desiredPolicies(set)),
		"objects", objects, "failed", len(failures), "duration", time.Since(start).Round(time.Millisecond))
	return failures, nil
}
