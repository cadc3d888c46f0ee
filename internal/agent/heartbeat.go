package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// The hub condition the agent reports in its heartbeat, and its reasons.
const (
	ConditionHubAgentReady   = "HubAgentReady"
	ReasonAgentReady         = "AgentReady"
	ReasonHubUnreachable     = "HubUnreachable"
	ReasonManagedClusterCRD  = "ManagedClusterCRDMissing"
	ReasonInventoryNotSynced = "InventoryNotSynced"
)

// runHeartbeat sends the hub status every heartbeat interval, and at once
// when the desired loop applied a new revision or a pass started or stopped
// failing, until ctx ends.
func (a *Agent) runHeartbeat(ctx context.Context) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		a.heartbeat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.heartbeatNow:
		}
	}
}

// heartbeat sends one hub status. A failure is logged and waits for the
// next tick: the heartbeat is its own retry.
func (a *Agent) heartbeat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(a.cfg.HeartbeatInterval, 10*time.Second))
	defer cancel()
	conditions := []private.Condition{a.readyCondition(a.probeHub(ctx))}
	if c, ok := a.lastPass.condition(); ok {
		conditions = append(conditions, c)
	}
	report := private.HubStatusReport{
		AgentVersion:         truncate(a.version, 128),
		AgentStartGeneration: a.startGeneration,
		AppliedRevision:      a.applied.Load(),
		Conditions:           &conditions,
	}
	if failures, ok := a.lastPass.acknowledgedFailures(report.AppliedRevision); ok {
		report.Failures = &failures
	}
	if a.informer.HasSynced() {
		report.Capacity = &map[string]string{"managed_clusters": strconv.Itoa(len(a.informer.GetStore().ListKeys()))}
	}
	ack, err := a.fleet.PutHubStatus(ctx, report)
	if err != nil && report.Failures != nil && permanent(err) {
		// A fleet manager older than per-entry failures refuses the field:
		// the rest of the heartbeat still goes.
		report.Failures = nil
		ack, err = a.fleet.PutHubStatus(ctx, report)
	}
	a.metrics.heartbeats.WithLabelValues(outcome(err)).Inc()
	if err != nil {
		if ctx.Err() == nil || errors.Is(err, context.DeadlineExceeded) {
			a.logger.Warn("heartbeat not sent", "error", err)
		}
		return
	}
	a.live.fleetOK(a.clock.Now())
	a.metrics.desiredRevision.Set(float64(ack.Revision))
	if ack.ResyncRequested {
		a.logger.Info("the fleet manager asked for a full inventory resync")
		a.requestResync()
	}
	// The fleet manager's revisions only move forward; one behind what was
	// applied means its state was reset: fetch the desired set anew.
	applied := a.applied.Load()
	switch {
	case ack.Revision < applied:
		a.logger.Warn("the fleet manager's revision is behind the applied one, fetching the desired set anew", "revision", ack.Revision, "applied_revision", applied)
		a.applied.CompareAndSwap(applied, 0)
	case applied > 0 && otherHistory(a.appliedHistory.Load(), ack.RevisionHistory):
		// Its revisions count in another history (the database was
		// restored to an earlier point, or a standby took over): the
		// applied revision's number says nothing of its set.
		a.logger.Warn("the fleet manager's revisions count in another history than the applied one's, fetching the desired set anew",
			"revision", ack.Revision, "applied_revision", applied)
		a.applied.CompareAndSwap(applied, 0)
	}
}

// probeHub lists one ManagedCluster: the hub answers, the CRD is there and
// the agent may read it.
func (a *Agent) probeHub(ctx context.Context) error {
	_, err := a.hub.Dynamic.Resource(managedClusterGVR).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	a.live.hubOK(a.clock.Now())
	return nil
}

// readyCondition derives HubAgentReady from the hub probe and the informer;
// its transition time moves only when its status does.
func (a *Agent) readyCondition(hubErr error) private.Condition {
	c := private.Condition{Type: ConditionHubAgentReady, Status: private.True, Reason: ReasonAgentReady}
	switch {
	case hubErr != nil && (apierrors.IsNotFound(hubErr) || meta.IsNoMatchError(hubErr)):
		c.Status, c.Reason = private.False, ReasonManagedClusterCRD
		c.Message = nonEmpty("the hub does not serve ManagedClusters: " + truncate(hubErr.Error(), 1024))
	case hubErr != nil:
		c.Status, c.Reason = private.False, ReasonHubUnreachable
		c.Message = nonEmpty(truncate(hubErr.Error(), 1024))
	case !a.informer.HasSynced():
		c.Status, c.Reason = private.False, ReasonInventoryNotSynced
		c.Message = nonEmpty("the ManagedCluster informer has not synced yet")
	default:
		c.Message = nonEmpty(fmt.Sprintf("applied revision %d", a.applied.Load()))
	}
	a.readyMu.Lock()
	defer a.readyMu.Unlock()
	if a.readyStatus != c.Status {
		a.readyStatus, a.readySince = c.Status, a.clock.Now().UTC()
	}
	c.LastTransitionTime = a.readySince
	return c
}

// requestResync asks for a full inventory resync, unless one is already asked.
func (a *Agent) requestResync() {
	select {
	case a.resync <- struct{}{}:
	default:
	}
}
