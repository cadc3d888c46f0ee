package fleet

import (
	"context"
	"slices"
	"strings"
)

// Subject kinds: who a request comes from, as the authorization policy sees it.
const (
	SubjectUser           = "user"
	SubjectServiceAccount = "service_account"
	SubjectAgent          = "agent"
	SubjectAnonymous      = "anonymous"
)

// Org roles: what a user may do within its organisation.
const (
	OrgRoleAdmin  = "admin"
	OrgRoleMember = "member"
	OrgRoleViewer = "viewer"
	OrgRoleNone   = "none"
)

// OrgRoleNames lists the org roles, most powerful first.
func OrgRoleNames() []string {
	return []string{OrgRoleAdmin, OrgRoleMember, OrgRoleViewer, OrgRoleNone}
}

// Subject is the caller an authorization decision is about.
type Subject struct {
	Kind     string
	ID       string
	Username string
	OrgID    string
	// FleetAdmin and FleetViewer are the fleet-wide roles (--admin-roles,
	// --admin-read-roles); OrgRole is the role within OrgID.
	FleetAdmin  bool
	FleetViewer bool
	OrgRole     string
}

// AuthzResource is what an action is done to (fleet.Resource is a synced hub object). For a list or a create, ID and
// CreatedBy are empty and OrgID is the organisation the list or create is for.
type AuthzResource struct {
	Kind      string
	ID        string
	OrgID     string
	CreatedBy string
}

// AuthzRequest asks whether Subject may do Action on Resource. Product and
// LiveRegistrations are the facts the pre-flight rules of clusters:create
// read (LiveRegistrations also for pools:add_cluster: a pool cluster is a
// registration). OrgLimits and OrgUsage are the organisation's
// capacity-pool limits and what it holds, and Units what a booking adds,
// for pools:create, pools:add_cluster and reservations:create (zero
// elsewhere).
type AuthzRequest struct {
	Subject           Subject
	Action            string
	Resource          AuthzResource
	Product           string
	LiveRegistrations int
	OrgLimits         OrgLimits
	OrgUsage          OrgUsage
	Units             int
}

// Authorizer is the one decision point: every handler and store operation
// that acts for a caller asks it.
type Authorizer interface {
	// Authorize returns nil when req is allowed. Errors: CodeActionForbidden
	// naming the action, or the pre-flight codes CodeOrgNotAllowed,
	// CodeUserNotAllowed, CodeProductNotAccepted, CodeQuotaExceeded,
	// CodePoolQuotaExceeded, CodeAdminRoleRequired; CodeInternal when the policy cannot be evaluated.
	Authorize(ctx context.Context, req AuthzRequest) error
}

// Permit decides, inside a store's write and with the row as the write read
// it under its lock, whether the caller may do the write's action on it: a
// change or deletion of an organisation's row asks once, where the row
// cannot change under the decision. The API makes one per request from the
// caller's subject and the operation's action (asking the Authorizer); the
// store supplies the resource. Errors: as Authorizer.Authorize.
type Permit func(ctx context.Context, res AuthzResource) error

// Permitted is the Permit of a caller that has decided already: an
// operator's tool or a test of the store. The API never passes it.
func Permitted(context.Context, AuthzResource) error { return nil }

// RoleMap turns a token's roles into a Subject: which roles make a fleet
// admin or viewer, which make an org admin, member or viewer, and the org role
// of a user with none of them. Every list is configuration.
type RoleMap struct {
	FleetAdmin  []string
	FleetViewer []string
	OrgAdmin    []string
	OrgMember   []string
	OrgViewer   []string
	// DefaultOrgRole is the org role of a user of an org with none of the
	// org roles above.
	DefaultOrgRole string
	// ServiceAccountPrefix marks the user names of service accounts.
	ServiceAccountPrefix string
}

// Subject returns the subject of a request that carries id; ok is false for
// a request without a verified token.
func (m RoleMap) Subject(id Identity, ok bool) Subject {
	if !ok {
		return Subject{Kind: SubjectAnonymous, OrgRole: OrgRoleNone}
	}
	s := Subject{Kind: SubjectUser, ID: id.Subject, Username: id.Username, OrgID: id.OrgID,
		FleetAdmin:  slices.ContainsFunc(m.FleetAdmin, id.HasRole),
		FleetViewer: slices.ContainsFunc(m.FleetViewer, id.HasRole), OrgRole: OrgRoleNone}
	switch {
	case id.AgentID != "" && id.OrgID == "":
		s.Kind, s.ID = SubjectAgent, id.AgentID
		return s
	case m.ServiceAccountPrefix != "" && strings.HasPrefix(id.Username, m.ServiceAccountPrefix):
		s.Kind = SubjectServiceAccount
	}
	if s.ID == "" {
		s.ID = id.Username
	}
	if id.OrgID == "" {
		return s
	}
	switch {
	case slices.ContainsFunc(m.OrgAdmin, id.HasRole):
		s.OrgRole = OrgRoleAdmin
	case slices.ContainsFunc(m.OrgMember, id.HasRole):
		s.OrgRole = OrgRoleMember
	case slices.ContainsFunc(m.OrgViewer, id.HasRole):
		s.OrgRole = OrgRoleViewer
	default:
		s.OrgRole = m.DefaultOrgRole
	}
	return s
}

type subjectKey struct{}

// NewContextWithSubject returns a copy of ctx that carries s, so that a
// store operation that decides inside its transaction asks about the
// request's subject.
func NewContextWithSubject(ctx context.Context, s Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectOf returns the subject ctx carries, if any.
func SubjectOf(ctx context.Context) (Subject, bool) {
	s, ok := ctx.Value(subjectKey{}).(Subject)
	return s, ok
}

// SubjectFromContext returns the subject ctx carries. A context without one
// (a caller of the store that is not an API request: a tool, a test) is the
// caller's identity acting as an admin of its organisation, today's
// behaviour of every member.
func SubjectFromContext(ctx context.Context, caller Identity) Subject {
	if s, ok := SubjectOf(ctx); ok {
		return s
	}
	return Subject{Kind: SubjectUser, ID: caller.Username, Username: caller.Username, OrgID: caller.OrgID, OrgRole: OrgRoleAdmin}
}

// DefaultRoleMap returns the org roles' defaults: org-admin, org-member and
// org-viewer, org admin for a user with none of them, service accounts
// named service-account-*. The fleet roles are left empty.
func DefaultRoleMap() RoleMap {
	return RoleMap{OrgAdmin: []string{"org-admin"}, OrgMember: []string{"org-member"}, OrgViewer: []string{"org-viewer"},
		DefaultOrgRole: OrgRoleAdmin, ServiceAccountPrefix: "service-account-"}
}

// The actions the code asks about: "<resource>:<verb>". Naming policies
// (DNS services) are asked about as dns_zones: onboarding is one role.
const (
	ActionClustersList       = "clusters:list"
	ActionClustersGet        = "clusters:get"
	ActionClustersCreate     = "clusters:create"
	ActionClustersUpdate     = "clusters:update"
	ActionClustersDelete     = "clusters:delete"
	ActionClustersImport     = "clusters:import"
	ActionPoliciesList       = "policies:list"
	ActionPoliciesGet        = "policies:get"
	ActionPoliciesCreate     = "policies:create"
	ActionPoliciesUpdate     = "policies:update"
	ActionPoliciesDelete     = "policies:delete"
	ActionPoliciesCompliance = "policies:compliance"
	ActionComplianceSummary  = "compliance:summary"
	ActionInventoryList      = "inventory:list"
	ActionInventoryGet       = "inventory:get"
	ActionInventoryWatch     = "inventory:watch"
	ActionHubsList           = "hubs:list"
	ActionHubsGet            = "hubs:get"
	ActionHubsCreate         = "hubs:create"
	ActionHubsUpdate         = "hubs:update"
	ActionHubsDelete         = "hubs:delete"
	ActionHubsCordon         = "hubs:cordon"
	ActionResourcesList      = "resources:list"
	ActionResourcesGet       = "resources:get"
	ActionResourcesWatch     = "resources:watch"
	ActionAgentDesired       = "agent:desired"
	ActionAgentStatus        = "agent:status"
	ActionAgentInventory     = "agent:inventory"
	ActionAgentResources     = "agent:resources"
	ActionAgentRegistrations = "agent:registrations"
	ActionBlueprintsList     = "blueprints:list"
	ActionBlueprintsGet      = "blueprints:get"
	ActionBlueprintsCreate   = "blueprints:create"
	ActionBlueprintsUpdate   = "blueprints:update"
	ActionBlueprintsDelete   = "blueprints:delete"
	ActionPoolsList          = "pools:list"
	ActionPoolsGet           = "pools:get"
	ActionPoolsCreate        = "pools:create"
	ActionPoolsUpdate        = "pools:update"
	ActionPoolsDelete        = "pools:delete"
	// ActionPoolsAddCluster is pool_mgr's, for the pool's owner, before it
	// registers a cluster of the pool: no API operation asks it.
	ActionPoolsAddCluster    = "pools:add_cluster"
	ActionReservationsList   = "reservations:list"
	ActionReservationsGet    = "reservations:get"
	ActionReservationsCreate = "reservations:create"
	ActionReservationsDelete = "reservations:delete"
	ActionUserMetricsRead    = "user_metrics:read"
	ActionDNSRecordsList     = "dns_records:list"
	ActionDNSRecordsGet      = "dns_records:get"
	ActionDNSRecordsCreate   = "dns_records:create"
	ActionDNSRecordsUpdate   = "dns_records:update"
	ActionDNSRecordsDelete   = "dns_records:delete"
	ActionDNSZonesList       = "dns_zones:list"
	ActionDNSZonesGet        = "dns_zones:get"
	ActionDNSZonesCreate     = "dns_zones:create"
	ActionDNSZonesUpdate     = "dns_zones:update"
	ActionDNSZonesDelete     = "dns_zones:delete"
	ActionOrgLimitsGet       = "org_limits:get"
	ActionOrgLimitsUpdate    = "org_limits:update"
)
