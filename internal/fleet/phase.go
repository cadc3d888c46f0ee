package fleet

// Phase summarises a registration's conditions for people and lists. It is
// derived, never set: code branches on conditions, not on the phase.
type Phase string

// The phases of a registration (ARCHITECTURE.md section 4).
const (
	PhaseAccepted       Phase = "accepted"
	PhaseProvisioning   Phase = "provisioning"
	PhaseReady          Phase = "ready"
	PhaseDeprovisioning Phase = "deprovisioning"
	PhaseDeleting       Phase = "deleting"
	PhaseDeleted        Phase = "deleted"
	PhaseFailed         Phase = "failed"
)

// Phases lists every phase, for metrics.
func Phases() []Phase {
	return []Phase{PhaseAccepted, PhaseProvisioning, PhaseReady, PhaseDeprovisioning, PhaseDeleting, PhaseDeleted, PhaseFailed}
}

// DerivePhase is the one function that turns a registration's facts into its phase.
func DerivePhase(cs Conditions, deletionRequested, deleted bool) Phase {
	switch {
	case deleted:
		return PhaseDeleted
	case deletionRequested:
		if r := cs.Reason(ConditionDelivered); r == ReasonWithdrawing || r == ReasonRemoved || r == ReasonSyncSetDeleted {
			return PhaseDeleting
		}
		return PhaseDeprovisioning
	case cs.Status(ConditionAccepted) == ConditionFalse,
		cs.Status(ConditionDelivered) == ConditionFalse && cs.Reason(ConditionDelivered) == ReasonDeliveryFailed:
		return PhaseFailed
	case cs.IsTrue(ConditionPlaced) && cs.IsTrue(ConditionDelivered) && (cs.IsTrue(ConditionJoined) && cs.IsTrue(ConditionAvailable) || unobservable(cs)):
		return PhaseReady
	case cs.IsTrue(ConditionPlaced):
		return PhaseProvisioning
	default:
		return PhaseAccepted
	}
}

// unobservable is true when no agent can report Joined and Available (a
// SyncSet hub): the delivery is all the fleet manager can know (ADR 0008).
func unobservable(cs Conditions) bool {
	return cs.Reason(ConditionJoined) == ReasonNoAgentOnHub && cs.Reason(ConditionAvailable) == ReasonNoAgentOnHub
}
