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
//
// Once a pass applied a whole set, the agent asks for the changes since its
// revision (ADR 0017) and applies only those, holding the whole set it
// merged them into; it asks for the whole set again after a start, for the
// first revision once --full-set-interval passed since its last whole set,
// and when a delta does not start where it stands.
func (a *Agent) runDesired(ctx context.Context) {
	b := newBackoff()
	var (
		held *private.DesiredSet // the applied set, while some of its entries fail
		// have is the whole set of the applied revision, the base of the
		// deltas; nil until a pass applied one.
		have   *private.DesiredSet
		fullAt time.Time // when the last whole set was applied
	)
	for ctx.Err() == nil {
		after := a.applied.Load()
		wait := a.cfg.PollWait
		if held != nil && held.Revision == after {
			wait = min(wait, b.next())
		}
		var since int64
		if have != nil && have.Revision == after && a.clock.Now().Sub(fullAt) < a.cfg.FullSetInterval {
			since = after
		}
		set, err := a.fleet.GetHubDesired(ctx, after, since, wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.metrics.polls.WithLabelValues(outcome(err)).Inc()
			a.logger.Warn("desired set not fetched, will retry", "error", err, "after", after)
			sleep(ctx, b.after(err))
			continue
		}
		a.live.fleetOK(a.clock.Now())
		a.metrics.polls.WithLabelValues(outcomeSuccess).Inc()
		if set != nil {
			a.metrics.desiredRevision.Set(float64(set.Revision))
		}
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
		} else {
			whole, delta := set, (*private.DesiredSet)(nil)
			if set.BaseRevision != nil {
				if have == nil || have.Revision != *set.BaseRevision || otherHistory(have.RevisionHistory, set.RevisionHistory) {
					// Not the base this agent holds (or its revision
					// counts in another history: the database was
					// restored or failed over): ask for the whole set.
					a.logger.Warn("desired-set delta does not start at the applied set, asking for the whole set",
						"base_revision", *set.BaseRevision, "revision", set.Revision)
					have = nil
					continue
				}
				whole, delta = mergeDesired(have, set), set
			}
			if !a.applyAndRecord(ctx, whole, delta, b) {
				continue
			}
			if have = whole; delta == nil {
				fullAt = a.clock.Now()
			}
			set = whole
		}
		held = nil
		if f, _ := a.lastPass.acknowledgedFailures(set.Revision); len(f) > 0 {
			held = set
			continue
		}
		b.reset()
	}
}

// mergeDesired returns the whole set delta makes of base: base's entries in
// their order, each changed one in its new version, without those removed,
// then the new ones in the delta's order; the delta's revision and policies.
func mergeDesired(base, delta *private.DesiredSet) *private.DesiredSet {
	removed := map[string]bool{}
	if delta.RemovedRegistrations != nil {
		for _, id := range *delta.RemovedRegistrations {
			removed[id] = true
		}
	}
	changed := make(map[string]private.DesiredRegistration, len(delta.Registrations))
	for _, r := range delta.Registrations {
		changed[r.RegistrationId] = r
	}
	out := &private.DesiredSet{Kind: delta.Kind, HubId: delta.HubId, Revision: delta.Revision, RevisionHistory: delta.RevisionHistory,
		Policies:      delta.Policies,
		Registrations: make([]private.DesiredRegistration, 0, len(base.Registrations)+len(delta.Registrations))}
	for _, r := range base.Registrations {
		if removed[r.RegistrationId] {
			continue
		}
		if c, ok := changed[r.RegistrationId]; ok {
			r = c
			delete(changed, r.RegistrationId)
		}
		out.Registrations = append(out.Registrations, r)
	}
	for _, r := range delta.Registrations {
		if _, ok := changed[r.RegistrationId]; ok && !removed[r.RegistrationId] {
			out.Registrations = append(out.Registrations, r)
		}
	}
	return out
}

// applyAndRecord applies a new set; it reports false when the pass failed
// as a whole (after its backoff), true when it acknowledged the revision.
// With delta, set is the whole set delta made of the applied one, and only
// what delta changed is applied.
func (a *Agent) applyAndRecord(ctx context.Context, set, delta *private.DesiredSet, b *backoff) bool {
	failures, err := a.apply(ctx, set, delta)
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
	a.appliedHistory.Store(set.RevisionHistory)
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

// apply applies one desired set, or only what delta changed in it, and
// records the pass: the entry failures, and err when the pass failed as a
// whole.
func (a *Agent) apply(ctx context.Context, set, delta *private.DesiredSet) ([]private.EntryFailure, error) {
	objects := 0
	for _, r := range set.Registrations {
		objects += len(r.Objects)
	}
	for _, p := range desiredPolicies(set) {
		objects += len(p.Objects)
	}
	a.metrics.desiredObjects.Set(float64(objects))
	start := time.Now()
	var (
		failures []private.EntryFailure
		err      error
		applied  = len(set.Registrations)
	)
	if delta == nil {
		failures, err = a.applier.applySet(ctx, set)
	} else {
		before, _ := a.lastPass.failuresOf(*delta.BaseRevision)
		failures, err = a.applier.applyDelta(ctx, set, delta, before)
		applied = len(delta.Registrations)
	}
	a.metrics.observeApply(err, time.Since(start))
	if err != nil {
		return failures, err
	}
	a.live.hubOK(a.clock.Now())
	if len(failures) > 0 {
		a.logger.Warn("desired set applied but for some entries, each failed alone", "revision", set.Revision, "failed", len(failures),
			"entries", describeFailures(failures))
	}
	a.logger.Info("desired set applied", "revision", set.Revision, "delta", delta != nil, "registrations", len(set.Registrations),
		"registrations_applied", applied, "policies", len(desiredPolicies(set)), "objects", objects, "failed", len(failures),
		"duration", time.Since(start).Round(time.Millisecond))
	return failures, nil
}

// otherHistory reports whether two revision histories are known and differ:
// revisions of one say nothing about the other's. A fleet manager older
// than the field sends none, and then revisions compare as before.
func otherHistory(a, b *string) bool {
	return a != nil && b != nil && *a != "" && *b != "" && *a != *b
}
