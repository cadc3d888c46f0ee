package fleet_test

import (
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestHubReportedCondition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ  string
		want bool
	}{
		{fleet.ConditionJoined, true},
		{fleet.ConditionAvailable, true},
		{fleet.ConditionAccepted, false},
		{fleet.ConditionPlaced, false},
		{fleet.ConditionDelivered, false},
		{fleet.ConditionHubAgentReady, false},
		{fleet.HubConditionJoined, false},
		{"joined", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := fleet.HubReportedCondition(tc.typ); got != tc.want {
			t.Errorf("HubReportedCondition(%q) = %v, want %v", tc.typ, got, tc.want)
		}
	}
}

func TestMergeHubReportedConditions(t *testing.T) {
	t.Parallel()
	accepted := condAt(fleet.ConditionAccepted, fleet.ConditionTrue, fleet.ReasonValidated)
	placed := condAt(fleet.ConditionPlaced, fleet.ConditionTrue, fleet.ReasonHubSelected)
	delivered := condAt(fleet.ConditionDelivered, fleet.ConditionTrue, fleet.ReasonAcknowledged)
	awaitingJoined := condAt(fleet.ConditionJoined, fleet.ConditionUnknown, fleet.ReasonAwaitingAgent)
	awaitingAvailable := condAt(fleet.ConditionAvailable, fleet.ConditionUnknown, fleet.ReasonAwaitingAgent)
	joined := fleet.Condition{Type: fleet.ConditionJoined, Status: fleet.ConditionTrue, Reason: "ManagedClusterJoined", ObservedGeneration: 2, LastTransitionTime: condT1}
	available := fleet.Condition{Type: fleet.ConditionAvailable, Status: fleet.ConditionFalse, Reason: "Unavailable", ObservedGeneration: 2, LastTransitionTime: condT1}
	hubPlaced := fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionFalse, Reason: "HubSaysSo", LastTransitionTime: condT1}
	tests := []struct {
		name     string
		own, hub fleet.Conditions
		want     fleet.Conditions
	}{
		{"nothing at all", nil, nil, fleet.Conditions{}},
		{"no report: the reconcilers' own", fleet.Conditions{accepted, placed, awaitingJoined, awaitingAvailable}, nil,
			fleet.Conditions{accepted, placed, awaitingJoined, awaitingAvailable}},
		{"the hub's Joined and Available replace the reconcilers', in place",
			fleet.Conditions{accepted, placed, awaitingJoined, awaitingAvailable, delivered}, fleet.Conditions{available, joined},
			fleet.Conditions{accepted, placed, joined, available, delivered}},
		{"a reported condition the reconcilers do not hold is added after theirs",
			fleet.Conditions{accepted, placed, awaitingJoined}, fleet.Conditions{joined, available},
			fleet.Conditions{accepted, placed, joined, available}},
		{"the report alone", nil, fleet.Conditions{joined, available}, fleet.Conditions{joined, available}},
		{"a reported type the hub may not tell is ignored", fleet.Conditions{accepted, placed}, fleet.Conditions{hubPlaced, joined},
			fleet.Conditions{accepted, placed, joined}},
		{"an unknown reported type is not added", fleet.Conditions{accepted},
			fleet.Conditions{condAt(fleet.HubConditionJoined, fleet.ConditionTrue, "ManagedClusterJoined")}, fleet.Conditions{accepted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			own, hub := slices.Clone(tc.own), slices.Clone(tc.hub)
			got := fleet.MergeHubReportedConditions(tc.own, tc.hub)
			if got == nil || !slices.Equal(got, tc.want) {
				t.Errorf("MergeHubReportedConditions(%+v, %+v) =\n%+v, want\n%+v", tc.own, tc.hub, got, tc.want)
			}
			if !slices.Equal(own, tc.own) || !slices.Equal(hub, tc.hub) {
				t.Errorf("MergeHubReportedConditions modified its arguments")
			}
		})
	}
}

func TestManagedClusterSummaryJoinedStatus(t *testing.T) {
	t.Parallel()
	cond := func(typ, status string) fleet.ClusterCondition {
		return fleet.ClusterCondition{Type: typ, Status: status}
	}
	accepted := func(status string) fleet.ClusterCondition { return cond(fleet.HubConditionAccepted, status) }
	joined := func(status string) fleet.ClusterCondition { return cond(fleet.HubConditionJoined, status) }
	tests := []struct {
		name       string
		conditions []fleet.ClusterCondition
		want       fleet.ConditionStatus
	}{
		{"accepted and joined", []fleet.ClusterCondition{accepted("True"), joined("True")}, fleet.ConditionTrue},
		{"joined and accepted, in any order", []fleet.ClusterCondition{joined("True"), cond(fleet.HubConditionAvailable, "False"), accepted("True")}, fleet.ConditionTrue},
		{"not accepted", []fleet.ClusterCondition{accepted("False"), joined("True")}, fleet.ConditionFalse},
		{"not joined", []fleet.ClusterCondition{accepted("True"), joined("False")}, fleet.ConditionFalse},
		{"not accepted, joined not reported", []fleet.ClusterCondition{accepted("False")}, fleet.ConditionFalse},
		{"not joined, accepted Unknown", []fleet.ClusterCondition{accepted("Unknown"), joined("False")}, fleet.ConditionFalse},
		{"accepted, joined not reported", []fleet.ClusterCondition{accepted("True")}, fleet.ConditionUnknown},
		{"joined, accepted not reported", []fleet.ClusterCondition{joined("True")}, fleet.ConditionUnknown},
		{"accepted, joining", []fleet.ClusterCondition{accepted("True"), joined("Unknown")}, fleet.ConditionUnknown},
		{"a status that is none of the three reads Unknown", []fleet.ClusterCondition{accepted("True"), joined("Yes")}, fleet.ConditionUnknown},
		{"available alone says nothing of joining", []fleet.ClusterCondition{cond(fleet.HubConditionAvailable, "True")}, fleet.ConditionUnknown},
		{"no conditions", nil, fleet.ConditionUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := fleet.ManagedClusterSummary{Name: "c1", Conditions: tc.conditions}
			if got := s.JoinedStatus(); got != tc.want {
				t.Errorf("JoinedStatus of %+v = %s, want %s", tc.conditions, got, tc.want)
			}
		})
	}
}
