package fleet_test

import (
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestInitialHubConditions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		mode fleet.DeliveryMode
		want fleet.Condition
	}{
		{fleet.DeliveryAgent, fleet.Condition{Type: fleet.ConditionHubReady, Status: fleet.ConditionUnknown, Reason: fleet.ReasonAwaitingHeartbeat,
			Message: "the hub's agent has not reported yet", ObservedGeneration: 1, LastTransitionTime: now.UTC()}},
		{fleet.DeliverySyncSetOCM, fleet.Condition{Type: fleet.ConditionHubReady, Status: fleet.ConditionTrue, Reason: fleet.ReasonNoAgentNeeded,
			Message: "registrations reach this hub through a SyncSet", ObservedGeneration: 1, LastTransitionTime: now.UTC()}},
		{fleet.DeliverySyncSetHive, fleet.Condition{Type: fleet.ConditionHubReady, Status: fleet.ConditionTrue, Reason: fleet.ReasonNoAgentNeeded,
			Message: "registrations reach this hub through a SyncSet", ObservedGeneration: 1, LastTransitionTime: now.UTC()}},
	}
	if len(tests) != len(fleet.DeliveryModes()) {
		t.Fatalf("the table covers %d delivery modes, there are %d", len(tests), len(fleet.DeliveryModes()))
	}
	for _, tc := range tests {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			got := fleet.InitialHubConditions(tc.mode, now)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("InitialHubConditions(%s) = %+v, want only %+v", tc.mode, got, tc.want)
			}
		})
	}
}

func TestMergeAgentConditions(t *testing.T) {
	t.Parallel()
	ready := condAt(fleet.ConditionHubReady, fleet.ConditionTrue, fleet.ReasonHeartbeatFresh)
	agentReady := condAt(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady")
	applied := condAt("DesiredSetApplied", fleet.ConditionTrue, "Applied")
	// reported builds a condition as an agent sends it: no transition time
	// of the fleet manager's.
	reported := func(typ string, status fleet.ConditionStatus, reason string) fleet.Condition {
		return fleet.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " reported", ObservedGeneration: 3}
	}
	at := func(c fleet.Condition, when time.Time) fleet.Condition { c.LastTransitionTime = when; return c }
	tests := []struct {
		name              string
		current, reported fleet.Conditions
		want              fleet.Conditions
	}{
		{"nothing reported keeps the current set", fleet.Conditions{ready, agentReady}, nil, fleet.Conditions{ready, agentReady}},
		{"a new condition is added at now", fleet.Conditions{ready},
			fleet.Conditions{reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady")},
			fleet.Conditions{ready, at(reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady"), condT1)}},
		{"the same status keeps its transition time and takes the report", fleet.Conditions{ready, agentReady},
			fleet.Conditions{reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "StillReady")},
			fleet.Conditions{ready, at(reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "StillReady"), condT0)}},
		{"a moved status moves the transition time", fleet.Conditions{ready, agentReady},
			fleet.Conditions{reported(fleet.ConditionHubAgentReady, fleet.ConditionFalse, "HubUnreachable")},
			fleet.Conditions{ready, at(reported(fleet.ConditionHubAgentReady, fleet.ConditionFalse, "HubUnreachable"), condT1)}},
		{"a reported Ready is ignored: hub_mgr derives it", fleet.Conditions{ready},
			fleet.Conditions{reported(fleet.ConditionHubReady, fleet.ConditionFalse, "AgentSaysSo")}, fleet.Conditions{ready}},
		{"a reported Ready is not added either", nil,
			fleet.Conditions{reported(fleet.ConditionHubReady, fleet.ConditionTrue, "AgentSaysSo")}, fleet.Conditions{}},
		{"a condition without a type is ignored", fleet.Conditions{ready},
			fleet.Conditions{reported("", fleet.ConditionTrue, "Nameless")}, fleet.Conditions{ready}},
		{"conditions the agent no longer reports are kept", fleet.Conditions{ready, agentReady, applied},
			fleet.Conditions{reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady")},
			fleet.Conditions{ready, at(reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady"), condT0), applied}},
		{"several conditions, Ready among them", fleet.Conditions{ready},
			fleet.Conditions{reported(fleet.ConditionHubReady, fleet.ConditionFalse, "AgentSaysSo"),
				reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady"), reported("DesiredSetApplied", fleet.ConditionFalse, "Failing")},
			fleet.Conditions{ready, at(reported(fleet.ConditionHubAgentReady, fleet.ConditionTrue, "AgentReady"), condT1),
				at(reported("DesiredSetApplied", fleet.ConditionFalse, "Failing"), condT1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := append(fleet.Conditions(nil), tc.current...)
			got := fleet.MergeAgentConditions(tc.current, tc.reported, condT1)
			if len(got) != len(tc.want) {
				t.Fatalf("MergeAgentConditions(%+v, %+v) = %+v, want %+v", tc.current, tc.reported, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("MergeAgentConditions(...)[%d] = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			if !before.Equal(tc.current) {
				t.Errorf("MergeAgentConditions modified current: %+v, was %+v", tc.current, before)
			}
		})
	}
}

func TestAgentReadinessMoved(t *testing.T) {
	t.Parallel()
	agent := func(status fleet.ConditionStatus) fleet.Condition {
		return condAt(fleet.ConditionHubAgentReady, status, "Reason")
	}
	ready := condAt(fleet.ConditionHubReady, fleet.ConditionTrue, fleet.ReasonHeartbeatFresh)
	tests := []struct {
		name              string
		current, reported fleet.Conditions
		want              bool
	}{
		{"nothing reported", fleet.Conditions{agent(fleet.ConditionTrue)}, nil, false},
		{"HubAgentReady not reported", fleet.Conditions{agent(fleet.ConditionTrue)},
			fleet.Conditions{condAt("DesiredSetApplied", fleet.ConditionFalse, "Failing")}, false},
		{"only Ready reported, moved", fleet.Conditions{ready, agent(fleet.ConditionTrue)},
			fleet.Conditions{condAt(fleet.ConditionHubReady, fleet.ConditionFalse, "AgentSaysSo")}, false},
		{"same status", fleet.Conditions{agent(fleet.ConditionTrue)}, fleet.Conditions{agent(fleet.ConditionTrue)}, false},
		{"same status, new reason", fleet.Conditions{agent(fleet.ConditionFalse)},
			fleet.Conditions{condAt(fleet.ConditionHubAgentReady, fleet.ConditionFalse, "ManagedClusterCRDMissing")}, false},
		{"True to False", fleet.Conditions{agent(fleet.ConditionTrue)}, fleet.Conditions{agent(fleet.ConditionFalse)}, true},
		{"False to True", fleet.Conditions{agent(fleet.ConditionFalse)}, fleet.Conditions{agent(fleet.ConditionTrue)}, true},
		{"first report True", fleet.Conditions{ready}, fleet.Conditions{agent(fleet.ConditionTrue)}, true},
		{"first report False", nil, fleet.Conditions{agent(fleet.ConditionFalse)}, true},
		{"first report Unknown: absent reads Unknown", nil, fleet.Conditions{agent(fleet.ConditionUnknown)}, false},
		{"beside other conditions", fleet.Conditions{ready, agent(fleet.ConditionTrue)},
			fleet.Conditions{condAt("DesiredSetApplied", fleet.ConditionTrue, "Applied"), agent(fleet.ConditionFalse)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := fleet.AgentReadinessMoved(tc.current, tc.reported); got != tc.want {
				t.Errorf("AgentReadinessMoved(%+v, %+v) = %v, want %v", tc.current, tc.reported, got, tc.want)
			}
		})
	}
}
