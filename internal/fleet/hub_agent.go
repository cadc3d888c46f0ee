package fleet

// What a hub's agent says of itself, and what hub_mgr makes of it.
const (
	// ConditionHubAgentReady is the condition an agent reports about itself:
	// False when it cannot do its work, e.g. the hub's API server does not
	// answer it.
	ConditionHubAgentReady = "HubAgentReady"
	// ReasonAgentNotReady is the Ready reason of a hub whose agent reports in
	// time but not ready: it takes no new placements.
	ReasonAgentNotReady = "AgentNotReady"
)
