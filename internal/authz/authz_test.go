package authz_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// actions are every action of the default policy, the coming ones included.
var actions = []string{
	"clusters:list", "clusters:get", "clusters:create", "clusters:update", "clusters:delete", "clusters:import",
	"policies:list", "policies:get", "policies:create", "policies:update", "policies:delete", "policies:compliance",
	"compliance:summary", "inventory:list", "inventory:get", "inventory:watch",
	"hubs:list", "hubs:get", "hubs:create", "hubs:update", "hubs:delete", "hubs:cordon", "resources:list", "resources:watch",
	"agent:desired", "agent:status", "agent:inventory", "agent:resources", "agent:registrations",
	"pools:list", "pools:get", "pools:create", "pools:update", "pools:delete",
	"reservations:list", "reservations:create", "reservations:cancel", "metrics:read",
	"dns_records:list", "dns_records:get", "dns_records:create", "dns_records:delete", "user_metrics:read",
	"dns_zones:list", "dns_zones:get", "dns_zones:create", "dns_zones:update", "dns_zones:delete",
	"org_limits:get", "org_limits:update",
}

var readVerbs = []string{"list", "get", "watch", "compliance", "summary", "read"}

var fleetViewerActions = []string{"hubs:list", "hubs:get", "resources:list", "resources:watch", "inventory:list",
	"inventory:get", "inventory:watch", "metrics:read", "pools:list", "pools:get", "reservations:list", "reservations:get",
	"user_metrics:read", "dns_zones:list", "dns_zones:get", "dns_records:list", "dns_records:get", "org_limits:get"}

func newAuthorizer(t testing.TB, cfg authz.Config) *authz.Authorizer {
	t.Helper()
	a, err := authz.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatalf("authz.New(): %v", err)
	}
	return a
}

func codeOf(err error) fleet.ErrorCode {
	if err == nil {
		return 0
	}
	return fleet.ErrorCodeOf(err)
}

// place is where the resource is, relative to the subject.
type place string

const (
	ownBySelf    place = "own org, created by self"
	ownByAnother place = "own org, created by another"
	otherOrg     place = "other org"
)

// want is the default policy as docs/authorization.md states it, per subject.
func want(subject, action string, where place) fleet.ErrorCode {
	family, verb, _ := strings.Cut(action, ":")
	orgFamily := slices.Contains([]string{"clusters", "policies", "compliance", "inventory", "pools", "reservations", "dns_records", "user_metrics"}, family)
	fleetDenial := fleet.CodeActionForbidden
	if slices.Contains([]string{"hubs", "resources", "metrics", "dns_zones", "org_limits"}, family) {
		fleetDenial = fleet.CodeAdminRoleRequired
	}
	read := slices.Contains(readVerbs, verb)
	switch {
	case family == "agent" && subject == "agent":
		return 0
	case family == "agent":
		return fleet.CodeNotFound
	case subject == "agent" && fleetDenial == fleet.CodeAdminRoleRequired:
		return fleet.CodeAdminRoleRequired
	case subject == "agent":
		return fleet.CodeActionForbidden
	case subject == "fleet admin":
		return 0
	case subject == "fleet viewer" && slices.Contains(fleetViewerActions, action):
		return 0
	case subject == "no org" && orgFamily && verb == "create":
		return fleet.CodeOrgNotAllowed
	case subject == "no org" && orgFamily:
		return 0
	case !orgFamily || where == otherOrg:
		return fleetDenial
	}
	allowed := false
	switch subject {
	case "org admin":
		allowed = true
	case "org member", "service account":
		allowed = read || verb == "create" || (where == ownBySelf && slices.Contains([]string{"update", "delete", "import", "cancel"}, verb))
	case "org viewer":
		allowed = read
	}
	if allowed {
		return 0
	}
	return fleet.CodeActionForbidden
}

// TestDefaultPolicy asserts every subject × action × resource of the default policy.
func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	a := newAuthorizer(t, authz.DefaultConfig())
	user := func(org, role string) fleet.Subject {
		return fleet.Subject{Kind: fleet.SubjectUser, ID: "u1", Username: "alice", OrgID: org, OrgRole: role}
	}
	subjects := map[string]fleet.Subject{
		"fleet admin":     {Kind: fleet.SubjectUser, ID: "sre", Username: "alice", OrgID: "sre", FleetAdmin: true, FleetViewer: true, OrgRole: fleet.OrgRoleNone},
		"fleet viewer":    {Kind: fleet.SubjectUser, ID: "ro", Username: "alice", OrgID: "sre", FleetViewer: true, OrgRole: fleet.OrgRoleNone},
		"org admin":       user("org-a", fleet.OrgRoleAdmin),
		"org member":      user("org-a", fleet.OrgRoleMember),
		"org viewer":      user("org-a", fleet.OrgRoleViewer),
		"org none":        user("org-a", fleet.OrgRoleNone),
		"service account": {Kind: fleet.SubjectServiceAccount, ID: "sa", Username: "alice", OrgID: "org-a", OrgRole: fleet.OrgRoleMember},
		"no org":          user("", fleet.OrgRoleNone),
		"agent":           {Kind: fleet.SubjectAgent, ID: "hub-1-agent", OrgRole: fleet.OrgRoleNone},
	}
	for name, s := range subjects {
		for _, action := range actions {
			for _, where := range []place{ownBySelf, ownByAnother, otherOrg} {
				res := fleet.AuthzResource{Kind: "thing", ID: "r1", OrgID: s.OrgID, CreatedBy: "alice"}
				switch where {
				case ownByAnother:
					res.CreatedBy = "bob"
				case otherOrg:
					res.OrgID, res.CreatedBy = "org-z", "zed"
				}
				req := fleet.AuthzRequest{Subject: s, Action: action, Resource: res, Product: string(fleet.Products()[0])}
				err := a.Authorize(context.Background(), req)
				if got, w := codeOf(err), want(name, action, where); got != w {
					t.Errorf("Authorize(%s, %s, %s) = %d (%v), want %d", name, action, where, got, err, w)
				}
				if err != nil && !strings.Contains(err.Error(), action) {
					t.Errorf("Authorize(%s, %s, %s): reason %q does not name the action", name, action, where, err)
				}
			}
		}
	}
}

// TestDefaultPolicyPreflight asserts the registration rules read from the
// configuration: lists, products, quota, and their order.
func TestDefaultPolicyPreflight(t *testing.T) {
	t.Parallel()
	ocp, other := string(fleet.Products()[0]), string(fleet.Products()[len(fleet.Products())-1])
	alice := fleet.Subject{Kind: fleet.SubjectUser, ID: "a", Username: "alice", OrgID: "org-a", OrgRole: fleet.OrgRoleAdmin}
	bob := fleet.Subject{Kind: fleet.SubjectUser, ID: "b", Username: "bob", OrgID: "org-b", OrgRole: fleet.OrgRoleMember}
	tests := []struct {
		name    string
		change  func(*fleet.Preflight)
		subject fleet.Subject
		product string
		live    int
		want    fleet.ErrorCode
	}{
		{"defaults allow", nil, alice, ocp, 100, 0},
		{"org on the allow list", func(p *fleet.Preflight) { p.AllowedOrgs = []string{"org-a"} }, alice, ocp, 0, 0},
		{"org off the allow list", func(p *fleet.Preflight) { p.AllowedOrgs = []string{"org-a"} }, bob, ocp, 0, fleet.CodeOrgNotAllowed},
		{"org on the deny list", func(p *fleet.Preflight) { p.DeniedOrgs = []string{"org-b"} }, bob, ocp, 0, fleet.CodeOrgNotAllowed},
		{"deny wins over allow", func(p *fleet.Preflight) { p.AllowedOrgs, p.DeniedOrgs = []string{"org-a"}, []string{"org-a"} }, alice, ocp, 0, fleet.CodeOrgNotAllowed},
		{"user on the allow list", func(p *fleet.Preflight) { p.AllowedUsers = []string{"alice"} }, alice, ocp, 0, 0},
		{"user off the allow list", func(p *fleet.Preflight) { p.AllowedUsers = []string{"alice"} }, bob, ocp, 0, fleet.CodeUserNotAllowed},
		{"user on the deny list", func(p *fleet.Preflight) { p.DeniedUsers = []string{"bob"} }, bob, ocp, 0, fleet.CodeUserNotAllowed},
		{"org checked before user", func(p *fleet.Preflight) { p.DeniedOrgs, p.DeniedUsers = []string{"org-b"}, []string{"bob"} }, bob, ocp, 0, fleet.CodeOrgNotAllowed},
		{"product accepted", func(p *fleet.Preflight) { p.AcceptedProducts = []fleet.Product{fleet.Product(ocp)} }, alice, ocp, 0, 0},
		{"product not accepted", func(p *fleet.Preflight) { p.AcceptedProducts = []fleet.Product{fleet.Product(ocp)} }, alice, other, 0, fleet.CodeProductNotAccepted},
		{"empty product list accepts all", func(p *fleet.Preflight) { p.AcceptedProducts = nil }, alice, "anything", 0, 0},
		{"under the quota", func(p *fleet.Preflight) { p.MaxRegistrationsPerOrg = 2 }, alice, ocp, 1, 0},
		{"at the quota", func(p *fleet.Preflight) { p.MaxRegistrationsPerOrg = 2 }, alice, ocp, 2, fleet.CodeQuotaExceeded},
		{"product checked before quota", func(p *fleet.Preflight) {
			p.MaxRegistrationsPerOrg, p.AcceptedProducts = 1, []fleet.Product{fleet.Product(ocp)}
		}, alice, other, 5, fleet.CodeProductNotAccepted},
		{"no organisation", nil, fleet.Subject{Kind: fleet.SubjectUser, Username: "drifter", OrgRole: fleet.OrgRoleNone}, ocp, 0, fleet.CodeOrgNotAllowed},
		{"viewer: the role first", func(p *fleet.Preflight) { p.DeniedOrgs = []string{"org-a"} },
			fleet.Subject{Kind: fleet.SubjectUser, Username: "v", OrgID: "org-a", OrgRole: fleet.OrgRoleViewer}, ocp, 0, fleet.CodeActionForbidden},
	}
	for _, tt := range tests {
		cfg := authz.DefaultConfig()
		if tt.change != nil {
			tt.change(&cfg.Preflight)
		}
		a := newAuthorizer(t, cfg)
		req := fleet.AuthzRequest{Subject: tt.subject, Action: "clusters:create", Product: tt.product, LiveRegistrations: tt.live,
			Resource: fleet.AuthzResource{Kind: "cluster", OrgID: tt.subject.OrgID}}
		err := a.Authorize(context.Background(), req)
		if got := codeOf(err); got != tt.want {
			t.Errorf("%s: Authorize(clusters:create) = %d (%v), want %d", tt.name, got, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), tt.product) && tt.want == fleet.CodeProductNotAccepted && !slices.Contains(fleet.Products(), fleet.Product(tt.product)) {
			t.Errorf("%s: the reason %q echoes the product sent", tt.name, err)
		}
	}
}

// TestDefaultPolicyUserMetricsOrgs asserts --user-metrics-allowed-orgs:
// organisations off the list may not read user-facing metrics; fleet
// viewers still read every organisation's.
func TestDefaultPolicyUserMetricsOrgs(t *testing.T) {
	t.Parallel()
	cfg := authz.DefaultConfig()
	cfg.UserMetricsOrgs = []string{"org-a"}
	a := newAuthorizer(t, cfg)
	for _, tt := range []struct {
		subject fleet.Subject
		want    fleet.ErrorCode
	}{
		{fleet.Subject{Kind: fleet.SubjectUser, Username: "alice", OrgID: "org-a", OrgRole: fleet.OrgRoleViewer}, 0},
		{fleet.Subject{Kind: fleet.SubjectUser, Username: "bob", OrgID: "org-b", OrgRole: fleet.OrgRoleAdmin}, fleet.CodeActionForbidden},
		{fleet.Subject{Kind: fleet.SubjectUser, Username: "ro", OrgID: "sre", FleetViewer: true, OrgRole: fleet.OrgRoleNone}, 0},
		// A token without an organisation reads, and finds nothing, as elsewhere.
		{fleet.Subject{Kind: fleet.SubjectUser, Username: "drifter", OrgRole: fleet.OrgRoleNone}, 0},
	} {
		err := a.Authorize(context.Background(), fleet.AuthzRequest{Subject: tt.subject, Action: fleet.ActionUserMetricsRead,
			Resource: fleet.AuthzResource{Kind: "cluster", OrgID: tt.subject.OrgID}})
		if got := codeOf(err); got != tt.want {
			t.Errorf("Authorize(%s of %q, user_metrics:read) = %d (%v), want %d", tt.subject.Username, tt.subject.OrgID, got, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "--user-metrics-allowed-orgs") {
			t.Errorf("Authorize(%s, user_metrics:read): reason %q does not name the flag", tt.subject.Username, err)
		}
	}
}

// forkPolicy lets org members register clusters and nothing else, and
// denies with the generic Forbidden code.
const forkPolicy = `package fleet.authz

default decision := {"allow": false, "code": 3, "reason": "this fork allows clusters:create only"}

decision := {"allow": true, "code": 0, "reason": "ok"} if {
	input.action == "clusters:create"
	input.subject.org_role == "member"
	count(data.fleet.config.denied_orgs) == 0
}
`

// TestForkPolicyFile loads a fork's policy from --authz-policy-file.
func TestForkPolicyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fork.rego")
	if err := os.WriteFile(path, []byte(forkPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := authz.DefaultConfig()
	cfg.PolicyFile = path
	a := newAuthorizer(t, cfg)
	member := fleet.Subject{Kind: fleet.SubjectUser, Username: "m", OrgID: "org-a", OrgRole: fleet.OrgRoleMember}
	admin := fleet.Subject{Kind: fleet.SubjectUser, Username: "a", OrgID: "org-a", OrgRole: fleet.OrgRoleAdmin}
	for _, tt := range []struct {
		subject fleet.Subject
		action  string
		want    fleet.ErrorCode
	}{
		{member, "clusters:create", 0},
		{member, "clusters:list", fleet.CodeForbidden},
		{admin, "clusters:create", fleet.CodeForbidden},
	} {
		err := a.Authorize(context.Background(), fleet.AuthzRequest{Subject: tt.subject, Action: tt.action})
		if got := codeOf(err); got != tt.want {
			t.Errorf("fork: Authorize(%s, %s) = %d (%v), want %d", tt.subject.OrgRole, tt.action, got, err, tt.want)
		}
	}
}

// TestPolicyFileRefused names the flag for a policy that does not compile or
// has no decision.
func TestPolicyFileRefused(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"syntax":      "package fleet.authz\ndecision := {",
		"no decision": "package fleet.authz\nallow := true\n",
		"wrong pkg":   "package other\ndecision := {\"allow\": true}\n",
		"unsafe":      "package fleet.authz\ndecision := x if { x > 1 }\n",
	} {
		path := filepath.Join(t.TempDir(), "p.rego")
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := authz.DefaultConfig()
		cfg.PolicyFile = path
		_, err := authz.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err == nil || !strings.Contains(err.Error(), "--authz-policy-file") {
			t.Errorf("New(%s policy) = %v, want an error naming --authz-policy-file", name, err)
		}
	}
}

// TestConfigValidate names the flag of each invalid setting.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		change func(*authz.Config)
		flag   string
	}{
		{func(c *authz.Config) { c.OrgRoles.DefaultOrgRole = "owner" }, "--authz-default-org-role"},
		{func(c *authz.Config) { c.OrgRoles.OrgViewer = []string{"org-admin"} }, "--authz-org-viewer-roles"},
		{func(c *authz.Config) { c.Preflight.MaxRegistrationsPerOrg = -1 }, "--registration-quota"},
		{func(c *authz.Config) { c.Preflight.AcceptedProducts = []fleet.Product{"nope"} }, "--registration-products"},
		{func(c *authz.Config) { c.PolicyFile = "/does/not/exist.rego" }, "--authz-policy-file"},
	} {
		cfg := authz.DefaultConfig()
		tt.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tt.flag)
		}
	}
	if err := authz.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}

// BenchmarkAuthorize is the cost of one decision: an org member updating a
// cluster it created, the longest path of the default policy but the
// pre-flight's.
func BenchmarkAuthorize(b *testing.B) {
	req := fleet.AuthzRequest{Subject: fleet.Subject{Kind: fleet.SubjectUser, ID: "u", Username: "alice", OrgID: "org-a", OrgRole: fleet.OrgRoleMember},
		Action: "clusters:update", Resource: fleet.AuthzResource{Kind: "cluster", ID: "c1", OrgID: "org-a", CreatedBy: "alice"}}
	for _, bc := range []struct {
		name  string
		cache int
	}{{"evaluated", 0}, {"cached", authz.DefaultConfig().DecisionCacheSize}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := authz.DefaultConfig()
			cfg.DecisionCacheSize = bc.cache
			a := newAuthorizer(b, cfg)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Authorize(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDefaultPolicyOrgLimits asserts the capacity-pool limits: a pool, a
// pool cluster or a booking at or past the organisation's limit is refused
// with PoolQuotaExceeded naming the limit and not its value, a pool cluster
// counts against --registration-quota, and a limit of 0 is none.
func TestDefaultPolicyOrgLimits(t *testing.T) {
	t.Parallel()
	// pool_mgr asks pools:add_cluster as the pool's owner acting as an
	// admin of its organisation.
	alice := fleet.Subject{Kind: fleet.SubjectUser, ID: "a", Username: "alice", OrgID: "org-a", OrgRole: fleet.OrgRoleAdmin}
	limits := fleet.OrgLimits{Pools: 7, PoolClusters: 9, ReservedUnits: 500}
	for _, tt := range []struct {
		name   string
		quota  int
		action string
		limits fleet.OrgLimits
		usage  fleet.OrgUsage
		live   int
		units  int
		want   fleet.ErrorCode
		names  string
	}{
		{"a pool below the limit", 0, fleet.ActionPoolsCreate, limits, fleet.OrgUsage{Pools: 6}, 0, 0, 0, ""},
		{"a pool at the limit", 0, fleet.ActionPoolsCreate, limits, fleet.OrgUsage{Pools: 7}, 0, 0, fleet.CodePoolQuotaExceeded, fleet.LimitMaxPools},
		{"no pool limit", 0, fleet.ActionPoolsCreate, fleet.OrgLimits{}, fleet.OrgUsage{Pools: 7000}, 0, 0, 0, ""},
		{"a cluster below the limit", 0, fleet.ActionPoolsAddCluster, limits, fleet.OrgUsage{PoolClusters: 8}, 0, 0, 0, ""},
		{"a cluster at the limit", 0, fleet.ActionPoolsAddCluster, limits, fleet.OrgUsage{PoolClusters: 9}, 0, 0, fleet.CodePoolQuotaExceeded, fleet.LimitMaxPoolClusters},
		{"a cluster at the registration quota", 8, fleet.ActionPoolsAddCluster, limits, fleet.OrgUsage{PoolClusters: 1}, 8, 0, fleet.CodeQuotaExceeded, "--registration-quota"},
		{"a booking that fits", 0, fleet.ActionReservationsCreate, limits, fleet.OrgUsage{ReservedUnits: 400}, 0, 100, 0, ""},
		{"a booking past the limit", 0, fleet.ActionReservationsCreate, limits, fleet.OrgUsage{ReservedUnits: 401}, 0, 100, fleet.CodePoolQuotaExceeded, fleet.LimitMaxReservedUnits},
		{"no unit limit", 0, fleet.ActionReservationsCreate, fleet.OrgLimits{}, fleet.OrgUsage{ReservedUnits: 1 << 40}, 0, 100, 0, ""},
		{"other actions ignore the limits", 0, fleet.ActionPoliciesCreate, fleet.OrgLimits{Pools: 1}, fleet.OrgUsage{Pools: 5}, 0, 0, 0, ""},
	} {
		cfg := authz.DefaultConfig()
		cfg.Preflight.MaxRegistrationsPerOrg = tt.quota
		a := newAuthorizer(t, cfg)
		err := a.Authorize(context.Background(), fleet.AuthzRequest{Subject: alice, Action: tt.action,
			Resource: fleet.AuthzResource{Kind: "pool", OrgID: "org-a"}, LiveRegistrations: tt.live, OrgLimits: tt.limits, OrgUsage: tt.usage, Units: tt.units})
		if got := codeOf(err); got != tt.want {
			t.Errorf("%s: Authorize(%s) = %d (%v), want %d", tt.name, tt.action, got, err, tt.want)
		}
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), tt.names) {
			t.Errorf("%s: the reason %q does not name %s", tt.name, err, tt.names)
		}
		for _, v := range []string{"7", "9", "500", "8"} {
			if strings.Contains(err.Error(), v) {
				t.Errorf("%s: the reason %q gives a value (%s)", tt.name, err, v)
			}
		}
	}
	if newAuthorizer(t, authz.DefaultConfig()).ReadsOrgUsage() {
		t.Errorf("ReadsOrgUsage() of the default policy = true, want false: it reads the usage against a limit above 0 only")
	}
}
