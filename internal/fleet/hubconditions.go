package fleet

import "time"

// InitialHubConditions are a new hub's conditions, at its first generation:
// Ready Unknown until its agent's first heartbeat, or Ready True at once on
// a SyncSet hub, which has no agent to hear from.
func InitialHubConditions(mode DeliveryMode, now time.Time) Conditions {
	if mode == DeliveryAgent {
		return Conditions{}.MarkUnknown(ConditionHubReady, ReasonAwaitingHeartbeat, "the hub's agent has not reported yet", 1, now)
	}
	return Conditions{}.MarkTrue(ConditionHubReady, ReasonNoAgentNeeded, "registrations reach this hub through a SyncSet", 1, now)
}

// MergeAgentConditions keeps the conditions an agent reports about its hub,
// except Ready, which hub_mgr derives from the heartbeats themselves, and
// any without a type.
func MergeAgentConditions(current, reported Conditions, now time.Time) Conditions {
	for _, c := range reported {
		if c.Type != ConditionHubReady && c.Type != "" {
			current = current.Set(c, now)
		}
	}
	return current
}

// AgentReadinessMoved reports whether a heartbeat changes the status of the
// agent's HubAgentReady condition: hub_mgr then derives the hub's Ready
// condition again at once, and placement follows the agent's own report from
// the heartbeat on. A heartbeat without HubAgentReady moves nothing.
func AgentReadinessMoved(current, reported Conditions) bool {
	for _, c := range reported {
		if c.Type == ConditionHubAgentReady {
			return c.Status != current.Status(ConditionHubAgentReady)
		}
	}
	return false
}
