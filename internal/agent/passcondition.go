package agent

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// The hub condition the agent reports, in its heartbeat, on its last pass
// over the desired set, and its reasons. The fleet manager keeps it with the
// hub's conditions (GET /admin/hubs/{id}), so an administrator can read why
// a hub's revision is not applied, or which of its entries are not.
const (
	ConditionDesiredSetApplied = "DesiredSetApplied"
	ReasonApplied              = "Applied"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonEntriesFailed        = "EntriesFailed"
	// ReasonKindNotServed is an entry's failure: one of its objects has a
	// kind the hub has no CRD for (a hub without the policy framework, say).
	ReasonKindNotServed = "KindNotServed"
)

// passRecord is the outcome of the agent's last pass over a desired set,
// and the entry failures of the last revision it acknowledged.
type passRecord struct {
	mu       sync.Mutex
	done     bool // a pass has run
	revision int64
	err      error
	failures []private.EntryFailure
	status   private.ConditionStatus
	since    time.Time

	acked         bool // a revision was acknowledged
	ackedRevision int64
	ackedFailures []private.EntryFailure
}

// record keeps a pass's outcome and reports whether the condition's status
// changed with it. A pass without err acknowledged its revision, with the
// failures of its entries.
func (p *passRecord) record(revision int64, err error, failures []private.EntryFailure, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	status := private.True
	if err != nil || len(failures) > 0 {
		status = private.False
	}
	changed := !p.done || status != p.status
	if changed {
		p.since = now.UTC()
	}
	p.done, p.revision, p.err, p.failures, p.status = true, revision, err, failures, status
	if err == nil {
		p.acked, p.ackedRevision, p.ackedFailures = true, revision, failures
	}
	return changed
}

// acknowledgedFailures returns the entry failures of revision, for the
// heartbeat that acknowledges it; ok is false when the agent has no news of
// that revision (no pass acknowledged it since the start).
func (p *passRecord) acknowledgedFailures(revision int64) (failures []private.EntryFailure, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.acked || p.ackedRevision != revision {
		return nil, false
	}
	failures = append([]private.EntryFailure{}, p.ackedFailures[:min(len(p.ackedFailures), maxReportedFailures)]...)
	return failures, true
}

// failuresOf returns every entry failure of revision, when a pass
// acknowledged it and was the last to: those a delta from it carries over.
func (p *passRecord) failuresOf(revision int64) (failures []private.EntryFailure, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.acked || p.ackedRevision != revision {
		return nil, false
	}
	return append([]private.EntryFailure{}, p.ackedFailures...), true
}

// condition is DesiredSetApplied as of the last pass; ok is false before
// the first.
func (p *passRecord) condition() (c private.Condition, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		return c, false
	}
	c = private.Condition{Type: ConditionDesiredSetApplied, Status: p.status, LastTransitionTime: p.since}
	switch {
	case p.err == nil && len(p.failures) == 0:
		c.Reason, c.Message = ReasonApplied, nonEmpty(fmt.Sprintf("applied revision %d", p.revision))
	case p.err == nil:
		c.Reason, c.Message = ReasonEntriesFailed, nonEmpty(truncate(fmt.Sprintf("applied revision %d but for %d entries, each failed alone: %s",
			p.revision, len(p.failures), describeFailures(p.failures)), 1024))
	default:
		c.Reason, c.Message = ReasonApplyFailed, nonEmpty(truncate(fmt.Sprintf("revision %d: %v", p.revision, p.err), 1024))
	}
	return c, true
}

// describeFailures names the failed entries and their reasons.
func describeFailures(failures []private.EntryFailure) string {
	parts := make([]string, 0, len(failures))
	for _, f := range failures {
		switch {
		case f.RegistrationId != nil:
			parts = append(parts, fmt.Sprintf("registration %s (%s)", *f.RegistrationId, f.Reason))
		case f.PolicyId != nil:
			parts = append(parts, fmt.Sprintf("policy %s (%s)", *f.PolicyId, f.Reason))
		}
	}
	return strings.Join(parts, ", ")
}
