package authz

import (
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Config is what a deployment decides of authorization: the policy, the
// claims' roles that make org admins, members and viewers, and the
// pre-flight data the policy reads for a registration.
type Config struct {
	// PolicyFile replaces the embedded default policy when set.
	PolicyFile string
	// OrgRoles maps the roles claim to org roles; FleetAdmin and FleetViewer
	// are left to the API's --admin-roles and --admin-read-roles.
	OrgRoles fleet.RoleMap
	// Preflight is what a registration passes: allow and deny lists,
	// accepted products, quota. The policy reads it as data.fleet.config.
	Preflight fleet.Preflight
	// UserMetricsOrgs are the organisations that may read user-facing
	// metrics (empty: all); the policy reads it as data.fleet.config.
	UserMetricsOrgs []string
	// DecisionCacheSize is how many recent decisions are remembered (0: none).
	// A policy that calls nondeterministic built-ins is never cached.
	DecisionCacheSize int
}

// DefaultConfig returns the defaults: the embedded policy, the roles
// org-admin, org-member and org-viewer, org admin for a user with none of
// them (every member of an org may do everything to its resources), no quota,
// every org, user and product accepted.
func DefaultConfig() Config {
	return Config{
		OrgRoles:          fleet.DefaultRoleMap(),
		Preflight:         fleet.Preflight{AcceptedProducts: fleet.Products()},
		DecisionCacheSize: 8192,
	}
}

// AddFlags binds the configuration to flags. The pre-flight flags keep the
// names they had as the store's.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.DecisionCacheSize, "authz-decision-cache-size", c.DecisionCacheSize,
		"recent authorization decisions remembered, since a policy without nondeterministic built-ins decides a request again the same way (0: evaluate every decision)")
	fs.StringVar(&c.PolicyFile, "authz-policy-file", c.PolicyFile, "Rego file replacing the default authorization policy (package fleet.authz, rule decision); empty: the embedded policy")
	r := &c.OrgRoles
	fs.StringSliceVar(&r.OrgAdmin, "authz-org-admin-roles", r.OrgAdmin, "roles that make a user an admin of its organisation: everything on the organisation's resources")
	fs.StringSliceVar(&r.OrgMember, "authz-org-member-roles", r.OrgMember, "roles that make a user a member of its organisation: reads, creates, and changes what it created")
	fs.StringSliceVar(&r.OrgViewer, "authz-org-viewer-roles", r.OrgViewer, "roles that make a user a viewer of its organisation: reads only")
	fs.StringVar(&r.DefaultOrgRole, "authz-default-org-role", r.DefaultOrgRole, "org role of a user with none of the org roles: admin, member, viewer or none")
	fs.StringVar(&r.ServiceAccountPrefix, "authz-service-account-prefix", r.ServiceAccountPrefix, "user-name prefix of service accounts (subject kind service_account); empty: none")
	p := &c.Preflight
	fs.IntVar(&p.MaxRegistrationsPerOrg, "registration-quota", p.MaxRegistrationsPerOrg, "most live registrations an organisation may have (0: no limit)")
	fs.StringSliceVar(&p.AllowedOrgs, "registration-allowed-orgs", p.AllowedOrgs, "organisations that may register clusters (empty: all)")
	fs.StringSliceVar(&p.DeniedOrgs, "registration-denied-orgs", p.DeniedOrgs, "organisations that may not register clusters")
	fs.StringSliceVar(&p.AllowedUsers, "registration-allowed-users", p.AllowedUsers, "users who may register clusters (empty: all)")
	fs.StringSliceVar(&p.DeniedUsers, "registration-denied-users", p.DeniedUsers, "users who may not register clusters")
	fs.Var(productsValue{&p.AcceptedProducts}, "registration-products", "products accepted for registration")
	fs.StringSliceVar(&c.UserMetricsOrgs, "user-metrics-allowed-orgs", c.UserMetricsOrgs,
		"organisations that may read user-facing metrics (empty: all); fleet viewers read every organisation's")
}

// Validate reports every invalid setting, naming its flag. The policy file
// is read and compiled by New, which names the flag too.
func (c Config) Validate() error {
	var p config.Problems
	if c.DecisionCacheSize < 0 {
		p.Addf("authz-decision-cache-size", "must not be negative (got %d)", c.DecisionCacheSize)
	}
	if c.Preflight.MaxRegistrationsPerOrg < 0 {
		p.Addf("registration-quota", "must not be negative (got %d)", c.Preflight.MaxRegistrationsPerOrg)
	}
	for _, prod := range c.Preflight.AcceptedProducts {
		if !slices.Contains(fleet.Products(), prod) {
			p.Addf("registration-products", "%q is not one of %v", prod, fleet.Products())
		}
	}
	if !slices.Contains(fleet.OrgRoleNames(), c.OrgRoles.DefaultOrgRole) {
		p.Addf("authz-default-org-role", "must be one of %v", fleet.OrgRoleNames())
	}
	lists := []struct {
		flag  string
		roles []string
	}{{"authz-org-admin-roles", c.OrgRoles.OrgAdmin}, {"authz-org-member-roles", c.OrgRoles.OrgMember}, {"authz-org-viewer-roles", c.OrgRoles.OrgViewer}}
	for i, l := range lists {
		for _, other := range lists[i+1:] {
			for _, role := range l.roles {
				if slices.Contains(other.roles, role) {
					p.Addf(other.flag, "role %q is also in --%s: a role makes one org role", role, l.flag)
				}
			}
		}
	}
	if c.PolicyFile != "" {
		if _, err := os.Stat(c.PolicyFile); err != nil {
			p.Addf("authz-policy-file", "cannot be read: %v", err)
		}
	}
	return p.Err()
}

// productsValue is a pflag.Value of a product list.
type productsValue struct{ p *[]fleet.Product }

func (v productsValue) String() string {
	s := make([]string, len(*v.p))
	for i, p := range *v.p {
		s[i] = string(p)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func (v productsValue) Set(s string) error {
	*v.p = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*v.p = append(*v.p, fleet.Product(p))
		}
	}
	return nil
}

func (v productsValue) Type() string { return "strings" }

// policyData is data.fleet.config, as the policy reads it.
func policyData(p fleet.Preflight, userMetricsOrgs []string) map[string]any {
	products := make([]string, len(p.AcceptedProducts))
	for i, prod := range p.AcceptedProducts {
		products[i] = string(prod)
	}
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return map[string]any{"fleet": map[string]any{"config": map[string]any{
		"quota": p.MaxRegistrationsPerOrg, "allowed_orgs": orEmpty(p.AllowedOrgs), "denied_orgs": orEmpty(p.DeniedOrgs),
		"allowed_users": orEmpty(p.AllowedUsers), "denied_users": orEmpty(p.DeniedUsers), "accepted_products": products,
		"user_metrics_orgs": orEmpty(userMetricsOrgs),
	}}}
}
