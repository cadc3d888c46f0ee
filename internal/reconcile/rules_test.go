package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestReadyCondition(t *testing.T) {
	t.Parallel()
	then := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	now := then.Add(time.Hour)
	lastBeat := then.Add(30 * time.Minute)
	ready := func(status fleet.ConditionStatus, reason string) fleet.Conditions {
		return fleet.Conditions{{Type: fleet.ConditionHubReady, Status: status, Reason: reason, ObservedGeneration: 1, LastTransitionTime: then}}
	}
	agentReported := fleet.Condition{Type: "ClusterManagerAvailable", Status: fleet.ConditionTrue, Reason: "AgentReported", LastTransitionTime: then}
	agentUnready := fleet.Condition{Type: fleet.ConditionHubAgentReady, Status: fleet.ConditionFalse, Reason: "HubUnreachable", LastTransitionTime: then}
	agentReady := fleet.Condition{Type: fleet.ConditionHubAgentReady, Status: fleet.ConditionTrue, Reason: "AgentReady", LastTransitionTime: then}
	tests := []struct {
		name       string
		mode       fleet.DeliveryMode
		supported  bool
		fresh      bool
		last       *time.Time
		conds      fleet.Conditions
		wantStatus fleet.ConditionStatus
		wantReason string
		wantTime   time.Time
	}{
		{"syncset-ocm hub, new", fleet.DeliverySyncSetOCM, true, false, nil, nil, fleet.ConditionTrue, fleet.ReasonNoAgentNeeded, now},
		{"syncset-hive hub, new", fleet.DeliverySyncSetHive, true, false, nil, nil, fleet.ConditionTrue, fleet.ReasonNoAgentNeeded, now},
		{"syncset hub, heartbeats ignored", fleet.DeliverySyncSetOCM, true, false, &lastBeat,
			ready(fleet.ConditionTrue, fleet.ReasonNoAgentNeeded), fleet.ConditionTrue, fleet.ReasonNoAgentNeeded, then},
		{"syncset hub that was an unready agent hub", fleet.DeliverySyncSetHive, true, false, &lastBeat,
			ready(fleet.ConditionFalse, fleet.ReasonHeartbeatTimeout), fleet.ConditionTrue, fleet.ReasonNoAgentNeeded, now},
		{"fresh heartbeat, new", fleet.DeliveryAgent, true, true, &lastBeat, nil, fleet.ConditionTrue, fleet.ReasonHeartbeatFresh, now},
		{"fresh heartbeat, still ready", fleet.DeliveryAgent, true, true, &lastBeat,
			ready(fleet.ConditionTrue, fleet.ReasonHeartbeatFresh), fleet.ConditionTrue, fleet.ReasonHeartbeatFresh, then},
		{"fresh heartbeat after awaiting the first", fleet.DeliveryAgent, true, true, &lastBeat,
			ready(fleet.ConditionUnknown, fleet.ReasonAwaitingHeartbeat), fleet.ConditionTrue, fleet.ReasonHeartbeatFresh, now},
		{"fresh heartbeat after a timeout", fleet.DeliveryAgent, true, true, &lastBeat,
			ready(fleet.ConditionFalse, fleet.ReasonHeartbeatTimeout), fleet.ConditionTrue, fleet.ReasonHeartbeatFresh, now},
		{"fresh heartbeat on a former syncset hub keeps the time", fleet.DeliveryAgent, true, true, &lastBeat,
			ready(fleet.ConditionTrue, fleet.ReasonNoAgentNeeded), fleet.ConditionTrue, fleet.ReasonHeartbeatFresh, then},
		{"never a heartbeat", fleet.DeliveryAgent, true, false, nil, nil, fleet.ConditionUnknown, fleet.ReasonAwaitingHeartbeat, now},
		{"never a heartbeat, still waiting", fleet.DeliveryAgent, true, false, nil,
			ready(fleet.ConditionUnknown, fleet.ReasonAwaitingHeartbeat), fleet.ConditionUnknown, fleet.ReasonAwaitingHeartbeat, then},
		{"stale heartbeat", fleet.DeliveryAgent, true, false, &lastBeat,
			ready(fleet.ConditionTrue, fleet.ReasonHeartbeatFresh), fleet.ConditionFalse, fleet.ReasonHeartbeatTimeout, now},
		{"stale heartbeat, still stale", fleet.DeliveryAgent, true, false, &lastBeat,
			ready(fleet.ConditionFalse, fleet.ReasonHeartbeatTimeout), fleet.ConditionFalse, fleet.ReasonHeartbeatTimeout, then},
		{"unsupported syncset mode", fleet.DeliverySyncSetOCM, false, false, nil,
			ready(fleet.ConditionTrue, fleet.ReasonNoAgentNeeded), fleet.ConditionFalse, fleet.ReasonDeliveryPending, now},
		{"unsupported mode, still unsupported", fleet.DeliverySyncSetHive, false, false, nil,
			ready(fleet.ConditionFalse, fleet.ReasonDeliveryPending), fleet.ConditionFalse, fleet.ReasonDeliveryPending, then},
		{"unsupported agent mode beats a fresh heartbeat", fleet.DeliveryAgent, false, true, &lastBeat,
			ready(fleet.ConditionTrue, fleet.ReasonHeartbeatFresh), fleet.ConditionFalse, fleet.ReasonDeliveryPending, now},
		{"fresh heartbeat from an agent that cannot reach its hub", fleet.DeliveryAgent, true, true, &lastBeat,
			append(ready(fleet.ConditionTrue, fleet.ReasonHeartbeatFresh), agentUnready), fleet.ConditionFalse, fleet.ReasonAgentNotReady, now},
		{"agent ready again", fleet.DeliveryAgent, true, true, &lastBeat,
			append(ready(fleet.ConditionFalse, fleet.ReasonAgentNotReady), agentReady), fleet.ConditionTrue, fleet.ReasonHeartbeatFresh, now},
		{"agent conditions kept", fleet.DeliveryAgent, true, false, &lastBeat,
			append(ready(fleet.ConditionTrue, fleet.ReasonHeartbeatFresh), agentReported), fleet.ConditionFalse, fleet.ReasonHeartbeatTimeout, now},
	}
	for _, tc := range tests {
		hub := fleet.Hub{Name: "hub-1", DeliveryMode: tc.mode, LastHeartbeatAt: tc.last, Conditions: tc.conds, Generation: 4}
		before := append(fleet.Conditions(nil), tc.conds...)
		got := readyCondition(fleet.HubLiveness{Hub: hub, HeartbeatFresh: tc.fresh}, tc.supported, now)
		c, ok := got.Get(fleet.ConditionHubReady)
		call := "readyCondition(" + tc.name + ")"
		switch {
		case !ok:
			t.Errorf("%s = %+v, want a Ready condition", call, got)
			continue
		case c.Status != tc.wantStatus || c.Reason != tc.wantReason:
			t.Errorf("%s = %s %s, want %s %s", call, c.Status, c.Reason, tc.wantStatus, tc.wantReason)
		case !c.LastTransitionTime.Equal(tc.wantTime):
			t.Errorf("%s last transition = %v, want %v", call, c.LastTransitionTime, tc.wantTime)
		case c.ObservedGeneration != 4:
			t.Errorf("%s observed generation = %d, want the hub's 4", call, c.ObservedGeneration)
		case c.Message == "":
			t.Errorf("%s has no message", call)
		}
		if tc.wantReason == fleet.ReasonHeartbeatTimeout && !strings.Contains(c.Message, lastBeat.Format(time.RFC3339)) {
			t.Errorf("%s message = %q, want the last heartbeat time %s", call, c.Message, lastBeat.Format(time.RFC3339))
		}
		for _, other := range tc.conds {
			if other.Type == fleet.ConditionHubReady {
				continue
			}
			if o, _ := got.Get(other.Type); o != other {
				t.Errorf("%s changed %s to %+v, want %+v", call, other.Type, o, other)
			}
		}
		if len(got) != max(1, len(tc.conds)) {
			t.Errorf("%s = %d conditions, want %d", call, len(got), max(1, len(tc.conds)))
		}
		if !before.Equal(tc.conds) {
			t.Errorf("%s modified the hub's conditions", call)
		}
	}
}
