package postgres

import "github.com/fleetmanager/fleet-manager/internal/fleet"

// agentReadinessMoved reports whether a heartbeat changes the status of the
// agent's HubAgentReady condition: hub_mgr then derives the hub's Ready
// condition again at once, and placement (hubReadySQL) follows the agent's
// own report from the heartbeat on.
func agentReadinessMoved(current, reported fleet.Conditions) bool {
	for _, c := range reported {
		if c.Type == fleet.ConditionHubAgentReady {
			return c.Status != current.Status(fleet.ConditionHubAgentReady)
		}
	}
	return false
}
