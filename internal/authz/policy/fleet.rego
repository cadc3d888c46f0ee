# The fleet manager's default authorization policy.
#
# input: {subject: {kind, id, username, org_id, fleet_admin, fleet_viewer, org_role},
#         action: "<family>:<verb>", resource: {kind, id, org_id, created_by},
#         product, live_registrations,
#         org_limits: {pools, pool_clusters, reserved_units}, (0: no limit)
#         org_usage: {pools, pool_clusters, reserved_units}, units}
# data.fleet.config: the pre-flight lists, accepted products and quota, and the
# organisations that may read user-facing metrics, from the flags.
#
# decision is {allow, code, reason}; code is an error code of the catalogue
# (GET /errors), reason names the action and the rule, never a secret.
package fleet.authz

cfg := data.fleet.config

subject := input.subject

action := input.action

res := input.resource

parts := split(action, ":")

family := parts[0]

verb := parts[1]

# Families whose resources belong to an organisation.
org_families := {"clusters", "policies", "compliance", "inventory", "blueprints", "pools", "reservations", "dns_records", "user_metrics"}

# Families of the fleet's own resources, for fleet admins and viewers.
fleet_families := {"hubs", "resources", "metrics", "dns_zones", "org_limits"}

read_verbs := {"list", "get", "watch", "compliance", "summary", "read"}

# Verbs a member may use on what it created.
owner_verbs := {"update", "delete", "import", "cancel"}

# What a fleet viewer reads: hubs, synced resources, the whole inventory, metrics,
# every organisation's user-facing metrics.
fleet_viewer_actions := {
	"hubs:list", "hubs:get", "resources:list", "resources:get", "resources:watch",
	"inventory:list", "inventory:get", "inventory:watch", "metrics:read", "user_metrics:read",
	"blueprints:list", "blueprints:get", "pools:list", "pools:get", "reservations:list", "reservations:get",
	"dns_zones:list", "dns_zones:get", "dns_records:list", "dns_records:get", "org_limits:get",
}

own_org if {
	subject.org_id != ""
	res.org_id == subject.org_id
}

created_by_self if {
	res.created_by != ""
	res.created_by == subject.username
}

role_allows if {
	subject.fleet_admin
	family != "agent"
}

role_allows if {
	subject.fleet_viewer
	fleet_viewer_actions[action]
}

role_allows if {
	org_families[family]
	own_org
	org_role_allows(subject.org_role)
}

org_role_allows("admin")

org_role_allows("member") if read_verbs[verb]

org_role_allows("member") if verb == "create"

org_role_allows("member") if {
	owner_verbs[verb]
	created_by_self
}

org_role_allows("viewer") if read_verbs[verb]

allow := {"allow": true, "code": 0, "reason": "allowed"}

deny(code, rule) := {"allow": false, "code": code, "reason": sprintf("%s is not allowed: %s", [action, rule])}

# The first rule that matches decides.
decision := deny(4, "the token is not a hub agent's") if {
	family == "agent"
	subject.kind != "agent"
} else := allow if {
	family == "agent"
} else := deny(22, "it needs a fleet administrator role (--admin-roles, or --admin-read-roles to read)") if {
	fleet_families[family]
	not role_allows
} else := deny(27, "a hub agent calls the agents' API only") if {
	subject.kind == "agent"
} else := deny(16, "the token carries no organisation") if {
	org_families[family]
	verb == "create"
	subject.org_id == ""
} else := allow if {
	# A token without an organisation owns nothing: its reads find nothing
	# and its changes find no resource.
	org_families[family]
	subject.org_id == ""
	not subject.fleet_admin
} else := deny(27, sprintf("the organisation role %s does not allow it%s", [subject.org_role, owner_hint])) if {
	not role_allows
} else := preflight if {
	action == "clusters:create"
} else := pool_limits if {
	pool_limited_actions[action]
} else := deny(27, "the organisation is not one of --user-metrics-allowed-orgs") if {
	family == "user_metrics"
	not subject.fleet_viewer
	count(cfg.user_metrics_orgs) > 0
	not subject.org_id in cfg.user_metrics_orgs
} else := allow

owner_hint := " on a resource another user created" if {
	subject.org_role == "member"
	owner_verbs[verb]
} else := ""

# The pre-flight rules of a registration, in order.
preflight := deny(16, "the organisation may not register clusters (--registration-denied-orgs)") if {
	subject.org_id in cfg.denied_orgs
} else := deny(16, "the organisation may not register clusters (--registration-allowed-orgs)") if {
	count(cfg.allowed_orgs) > 0
	not subject.org_id in cfg.allowed_orgs
} else := deny(17, "the user may not register clusters (--registration-denied-users)") if {
	subject.username in cfg.denied_users
} else := deny(17, "the user may not register clusters (--registration-allowed-users)") if {
	count(cfg.allowed_users) > 0
	not subject.username in cfg.allowed_users
} else := deny(18, sprintf("the product is not accepted; accepted: %v", [cfg.accepted_products])) if {
	count(cfg.accepted_products) > 0
	not input.product in cfg.accepted_products
} else := deny(15, sprintf("the organisation has %d live registrations, its quota is %d", [input.live_registrations, cfg.quota])) if {
	cfg.quota > 0
	input.live_registrations >= cfg.quota
} else := allow

# What an organisation may hold of capacity pools. The limits are the
# store's: the flags' defaults or the organisation's overrides (admin API);
# 0 is no limit. A refusal names the limit, never its value. A pool cluster
# is a registration (ADR 0018), so --registration-quota bounds it too.
pool_limited_actions := {"pools:create", "pools:add_cluster", "reservations:create"}

limits := input.org_limits

usage := input.org_usage

pool_limits := deny(34, "the organisation has reached its limit max_pools") if {
	action == "pools:create"
	limits.pools > 0
	usage.pools >= limits.pools
} else := deny(34, "the organisation has reached its limit max_pool_clusters") if {
	action == "pools:add_cluster"
	limits.pool_clusters > 0
	usage.pool_clusters >= limits.pool_clusters
} else := deny(15, "the organisation has reached its registration quota (--registration-quota)") if {
	action == "pools:add_cluster"
	cfg.quota > 0
	input.live_registrations >= cfg.quota
} else := deny(34, "the reservation would take the organisation past its limit max_reserved_units") if {
	action == "reservations:create"
	limits.reserved_units > 0
	usage.reserved_units + input.units > limits.reserved_units
} else := allow
