package fleet

import "slices"

// hubReportedTypes are the registration conditions only the hub can tell.
var hubReportedTypes = []string{ConditionJoined, ConditionAvailable}

// HubReportedCondition reports whether t is a registration condition only
// the hub can tell (Joined, Available): an agent's report of any other type
// is ignored.
func HubReportedCondition(t string) bool { return slices.Contains(hubReportedTypes, t) }

// MergeHubReportedConditions is the one view of a registration's
// conditions: the reconcilers' own, with the hub-reported ones in place of
// theirs, and those the reconcilers do not hold after them. Other types in
// hub are ignored.
func MergeHubReportedConditions(own, hub Conditions) Conditions {
	out := make(Conditions, 0, len(own)+len(hub))
	for _, c := range own {
		if reported, ok := hub.Get(c.Type); ok && HubReportedCondition(c.Type) {
			c = reported
		}
		out = append(out, c)
	}
	for _, c := range hub {
		if _, ok := out.Get(c.Type); !ok && HubReportedCondition(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// JoinedStatus is Joined as the registration lifecycle means it: True when
// the hub accepted the cluster and it joined, False when either is False,
// Unknown otherwise.
func (s ManagedClusterSummary) JoinedStatus() ConditionStatus {
	accepted, joined := s.ConditionStatus(HubConditionAccepted), s.ConditionStatus(HubConditionJoined)
	switch {
	case accepted == ConditionTrue && joined == ConditionTrue:
		return ConditionTrue
	case accepted == ConditionFalse || joined == ConditionFalse:
		return ConditionFalse
	}
	return ConditionUnknown
}
