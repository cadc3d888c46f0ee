package fleet_test

import (
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// phaseConds builds conditions from type=status/reason pairs.
func phaseConds(pairs ...string) fleet.Conditions {
	var cs fleet.Conditions
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i+2 < len(pairs); i += 3 {
		cs = cs.Set(fleet.Condition{Type: pairs[i], Status: fleet.ConditionStatus(pairs[i+1]), Reason: pairs[i+2]}, now)
	}
	return cs
}

func TestDerivePhase(t *testing.T) {
	t.Parallel()
	const (
		T = string(fleet.ConditionTrue)
		F = string(fleet.ConditionFalse)
		U = string(fleet.ConditionUnknown)
	)
	accepted := []string{fleet.ConditionAccepted, T, fleet.ReasonValidated}
	placed := []string{fleet.ConditionPlaced, T, fleet.ReasonHubSelected}
	delivered := []string{fleet.ConditionDelivered, T, fleet.ReasonAcknowledged}
	joined := []string{fleet.ConditionJoined, T, "Joined"}
	available := []string{fleet.ConditionAvailable, T, "Available"}
	ready := phaseConcat(accepted, placed, delivered, joined, available)
	tests := []struct {
		name              string
		cs                fleet.Conditions
		deletionRequested bool
		deleted           bool
		want              fleet.Phase
	}{
		{"no conditions", nil, false, false, fleet.PhaseAccepted},
		{"accepted only", phaseConds(accepted...), false, false, fleet.PhaseAccepted},
		{"not placed yet", phaseConds(phaseConcat(accepted, []string{fleet.ConditionPlaced, U, fleet.ReasonNotPlaced})...), false, false, fleet.PhaseAccepted},
		{"no hub available", phaseConds(phaseConcat(accepted, []string{fleet.ConditionPlaced, F, fleet.ReasonNoHubAvailable})...), false, false, fleet.PhaseAccepted},
		{"placed", phaseConds(phaseConcat(accepted, placed)...), false, false, fleet.PhaseProvisioning},
		{"placed, published", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonPublished})...), false, false, fleet.PhaseProvisioning},
		{"placed, delivery mode pending", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, U, fleet.ReasonDeliveryPending})...), false, false, fleet.PhaseProvisioning},
		{"delivered, awaiting the agent", phaseConds(phaseConcat(accepted, placed, delivered,
			[]string{fleet.ConditionJoined, U, fleet.ReasonAwaitingAgent, fleet.ConditionAvailable, U, fleet.ReasonAwaitingAgent})...), false, false, fleet.PhaseProvisioning},
		{"joined, not available", phaseConds(phaseConcat(accepted, placed, delivered, joined, []string{fleet.ConditionAvailable, F, "Unavailable"})...), false, false, fleet.PhaseProvisioning},
		{"ready", phaseConds(ready...), false, false, fleet.PhaseReady},
		{"ready without Accepted", phaseConds(phaseConcat(placed, delivered, joined, available)...), false, false, fleet.PhaseReady},
		{"delivered by SyncSet, no agent to report", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, T, fleet.ReasonSyncSetApplied},
			[]string{fleet.ConditionJoined, U, fleet.ReasonNoAgentOnHub, fleet.ConditionAvailable, U, fleet.ReasonNoAgentOnHub})...), false, false, fleet.PhaseReady},
		{"SyncSet API failing, no agent", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonSyncSetAPIError},
			[]string{fleet.ConditionJoined, U, fleet.ReasonNoAgentOnHub, fleet.ConditionAvailable, U, fleet.ReasonNoAgentOnHub})...), false, false, fleet.PhaseProvisioning},
		{"SyncSet rejected", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonDeliveryFailed},
			[]string{fleet.ConditionJoined, U, fleet.ReasonNoAgentOnHub, fleet.ConditionAvailable, U, fleet.ReasonNoAgentOnHub})...), false, false, fleet.PhaseFailed},
		{"no agent on one condition only", phaseConds(phaseConcat(accepted, placed, delivered,
			[]string{fleet.ConditionJoined, U, fleet.ReasonNoAgentOnHub, fleet.ConditionAvailable, U, fleet.ReasonAwaitingAgent})...), false, false, fleet.PhaseProvisioning},
		{"deletion requested, SyncSet deleted", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonSyncSetDeleted})...), true, false, fleet.PhaseDeleting},
		{"ready but not placed", phaseConds(phaseConcat(accepted, delivered, joined, available)...), false, false, fleet.PhaseAccepted},
		{"not accepted", phaseConds(fleet.ConditionAccepted, F, "Invalid"), false, false, fleet.PhaseFailed},
		{"not accepted beats ready", phaseConds(phaseConcat(ready, []string{fleet.ConditionAccepted, F, "Invalid"})...), false, false, fleet.PhaseFailed},
		{"delivery failed", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonDeliveryFailed})...), false, false, fleet.PhaseFailed},
		{"DeliveryFailed reason but Unknown is not failed", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, U, fleet.ReasonDeliveryFailed})...), false, false, fleet.PhaseProvisioning},
		{"deletion requested, nothing withdrawn", phaseConds(ready...), true, false, fleet.PhaseDeprovisioning},
		{"deletion requested, unplaced", phaseConds(accepted...), true, false, fleet.PhaseDeprovisioning},
		{"deletion requested, withdrawing", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonWithdrawing})...), true, false, fleet.PhaseDeleting},
		{"deletion requested, removed", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonRemoved})...), true, false, fleet.PhaseDeleting},
		{"deletion requested beats failed", phaseConds(fleet.ConditionAccepted, F, "Invalid", fleet.ConditionDelivered, F, fleet.ReasonDeliveryFailed), true, false, fleet.PhaseDeprovisioning},
		{"Withdrawing without a deletion request", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonWithdrawing})...), false, false, fleet.PhaseProvisioning},
		{"deleted", phaseConds(ready...), false, true, fleet.PhaseDeleted},
		{"deleted beats deletion requested", phaseConds(phaseConcat(accepted, placed, []string{fleet.ConditionDelivered, F, fleet.ReasonRemoved})...), true, true, fleet.PhaseDeleted},
		{"deleted beats failed", phaseConds(fleet.ConditionAccepted, F, "Invalid"), true, true, fleet.PhaseDeleted},
	}
	seen := map[fleet.Phase]bool{}
	for _, tc := range tests {
		got := fleet.DerivePhase(tc.cs, tc.deletionRequested, tc.deleted)
		if got != tc.want {
			t.Errorf("%s: DerivePhase(%v, %v, %v) = %s, want %s", tc.name, tc.cs, tc.deletionRequested, tc.deleted, got, tc.want)
		}
		seen[tc.want] = true
	}
	for _, p := range fleet.Phases() {
		if !seen[p] {
			t.Errorf("no case derives phase %s", p)
		}
	}
}

func TestPhasesAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[fleet.Phase]bool{}
	for _, p := range fleet.Phases() {
		if p == "" || seen[p] {
			t.Errorf("Phases() holds %q twice or empty", p)
		}
		seen[p] = true
	}
	if len(seen) != 7 {
		t.Errorf("Phases() = %v, want the 7 phases", fleet.Phases())
	}
}

func phaseConcat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
