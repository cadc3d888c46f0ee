package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func newTestAgent(t *testing.T, f *fakeFleet, hub *Hub, cfg Config, clock *fixedClock) *Agent {
	t.Helper()
	cfg.FleetManagerURL, cfg.HubID = f.URL(), f.hubID
	fc, _ := newTestFleetClient(t, f, cfg)
	a := New(cfg, fc, hub, Options{Version: "v-test", StartGeneration: 42, Logger: testLogger(), Metrics: newTestMetrics(t), Clock: clock})
	if err := a.Ready(t.Context()); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Errorf("Ready() before the lease is held = %v, want an error naming the lease", err)
	}
	a.setLeading(true) // as Run does once it holds the hub's lease
	return a
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	clock := &fixedClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	a := newTestAgent(t, f, newFakeHub(managedCluster(t, "c1", nil, "")), DefaultConfig(), clock)
	rev := f.setDesired()
	a.applied.Store(rev)

	f.requestResync()
	a.heartbeat(t.Context())
	hbs := f.heartbeats()
	if len(hbs) != 1 {
		t.Fatalf("heartbeat() sent %d reports, want 1", len(hbs))
	}
	hb := hbs[0]
	if hb.AgentVersion != "v-test" || hb.AgentStartGeneration != 42 || hb.AppliedRevision != rev {
		t.Errorf("heartbeat = version %q, start generation %d, applied %d; want v-test, 42, %d", hb.AgentVersion, hb.AgentStartGeneration, hb.AppliedRevision, rev)
	}
	if f.appliedRevision() != rev {
		t.Errorf("fleet manager's applied revision = %d, want %d", f.appliedRevision(), rev)
	}
	// The informer has not run: no capacity yet, and not ready for that reason.
	if hb.Capacity != nil {
		t.Errorf("heartbeat capacity before the informer synced = %v, want none", *hb.Capacity)
	}
	if hb.Conditions == nil || len(*hb.Conditions) != 1 {
		t.Fatalf("heartbeat conditions = %v, want HubAgentReady", hb.Conditions)
	}
	c := (*hb.Conditions)[0]
	if c.Type != ConditionHubAgentReady || c.Status != private.False || c.Reason != ReasonInventoryNotSynced || !c.LastTransitionTime.Equal(clock.t) {
		t.Errorf("HubAgentReady = %+v, want False InventoryNotSynced since now", c)
	}
	select {
	case <-a.resync:
	default:
		t.Errorf("resync_requested in the answer did not request a resync")
	}
	// Probed the hub and talked to the fleet manager: ready.
	if err := a.Ready(t.Context()); err != nil {
		t.Errorf("Ready() after a heartbeat = %v, want nil", err)
	}
	clock.t = clock.t.Add(3*a.cfg.HeartbeatInterval + time.Second)
	if err := a.Ready(t.Context()); err == nil {
		t.Errorf("Ready() three heartbeat intervals later = nil, want an error")
	}
	// After a pass over the desired set, its outcome goes along.
	a.lastPass.record(rev, errors.New("the hub refused an object"), nil, clock.t)
	a.heartbeat(t.Context())
	hbs = f.heartbeats()
	if got := hbs[len(hbs)-1].Conditions; got == nil || len(*got) != 2 || (*got)[1].Type != ConditionDesiredSetApplied ||
		(*got)[1].Status != private.False || (*got)[1].Reason != ReasonApplyFailed {
		t.Errorf("heartbeat conditions after a failed pass = %+v, want HubAgentReady and DesiredSetApplied False ApplyFailed", got)
	}
}

func TestHeartbeatFailureAndRevisionReset(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	clock := &fixedClock{t: time.Now()}
	a := newTestAgent(t, f, newFakeHub(), DefaultConfig(), clock)
	if err := a.Ready(t.Context()); err == nil {
		t.Errorf("Ready() before any exchange = nil, want an error")
	}
	f.failNext("putHubStatus", 1)
	a.heartbeat(t.Context()) // logged, not fatal
	if err := a.Ready(t.Context()); err == nil {
		t.Errorf("Ready() after a failed heartbeat = nil, want an error")
	}

	// A fleet manager whose revision is behind the applied one was reset.
	a.applied.Store(7)
	a.heartbeat(t.Context())
	if got := a.applied.Load(); got != 0 {
		t.Errorf("applied revision after an answer with revision 0 = %d, want 0 (fetch anew)", got)
	}
}

func TestReadyConditionTransitions(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	clock := &fixedClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	a := newTestAgent(t, f, newFakeHub(), DefaultConfig(), clock)
	first := a.readyCondition(errors.New("connection refused"))
	if first.Status != private.False || first.Reason != ReasonHubUnreachable {
		t.Errorf("readyCondition(hub down) = %+v, want False HubUnreachable", first)
	}
	clock.t = clock.t.Add(time.Minute)
	again := a.readyCondition(errors.New("connection reset"))
	if !again.LastTransitionTime.Equal(first.LastTransitionTime) {
		t.Errorf("readyCondition transition time moved without a status change: %s, want %s", again.LastTransitionTime, first.LastTransitionTime)
	}
}
