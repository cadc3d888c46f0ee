package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// The hub condition the agent reports, in its heartbeat, on its last pass
// over the desired set, and its reasons. The fleet manager keeps it with the
// hub's conditions (GET /admin/hubs/{id}), so an administrator can read why
// a hub's revision is not applied.
const (
	ConditionDesiredSetApplied = "DesiredSetApplied"
	ReasonApplied              = "Applied"
	ReasonKindNotServed        = "KindNotServed"
	ReasonApplyFailed          = "ApplyFailed"
)

// passRecord is the outcome of the agent's last pass over a desired set.
type passRecord struct {
	mu       sync.Mutex
	done     bool // a pass has run
	revision int64
	err      error
	status   private.ConditionStatus
	since    time.Time
}

// record keeps a pass's outcome and reports whether the condition's status
// changed with it.
func (p *passRecord) record(revision int64, err error, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	status := private.True
	if err != nil {
		status = private.False
	}
	changed := !p.done || status != p.status
	if changed {
		p.since = now.UTC()
	}
	p.done, p.revision, p.err, p.status = true, revision, err, status
	return changed
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
	var noKind *meta.NoKindMatchError
	switch {
	case p.err == nil:
		c.Reason, c.Message = ReasonApplied, nonEmpty(fmt.Sprintf("applied revision %d", p.revision))
	case errors.As(p.err, &noKind):
		c.Reason = ReasonKindNotServed
		c.Message = nonEmpty(truncate(fmt.Sprintf("revision %d: the hub does not serve %s (is its CRD installed?); the rest of the set was applied: %v",
			p.revision, noKind.GroupKind, p.err), 1024))
	default:
		c.Reason, c.Message = ReasonApplyFailed, nonEmpty(truncate(fmt.Sprintf("revision %d: %v", p.revision, p.err), 1024))
	}
	return c, true
}
