package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The subjects of the authorization table. Org A's admin is ada, its member
// mel, its viewer vic; bob is a user of org B with no org role (the default
// role, admin); the fleet admin and viewer are SREs of org sre; the agent is
// hub-1's.
const (
	subOrgAdmin    = "org admin"
	subOrgMember   = "org member"
	subOrgViewer   = "org viewer"
	subOtherOrg    = "user of another org"
	subFleetAdmin  = "fleet admin"
	subFleetViewer = "fleet viewer"
	subAgent       = "agent"
)

var authzSubjects = []string{subOrgAdmin, subOrgMember, subOrgViewer, subOtherOrg, subFleetAdmin, subFleetViewer, subAgent}

// The resources of the table: org A's, created by mel (the member's own) or
// by ada (another user's, for the member), and org B's, created by bob.
const (
	resMels = "org A's, created by the member"
	resAdas = "org A's, created by the org admin"
	resBobs = "org B's"
	resNone = "none"
)

// authzWant is the outcome of one cell: a status and, for an error, its code.
type authzWant struct {
	status int
	code   fleet.ErrorCode
}

var (
	ok200   = authzWant{status: http.StatusOK}
	ok201   = authzWant{status: http.StatusCreated}
	ok202   = authzWant{status: http.StatusAccepted}
	ok204   = authzWant{status: http.StatusNoContent}
	denied  = authzWant{http.StatusForbidden, fleet.CodeActionForbidden}
	adminRq = authzWant{http.StatusForbidden, fleet.CodeAdminRoleRequired}
	hidden  = authzWant{http.StatusNotFound, fleet.CodeNotFound}
)

// orgAWant is the outcome of an action on one of org A's resources, for the
// subjects of org A; others are decided by the callers below.
func orgAWant(subject, res string, read bool, allowed authzWant, memberOwnOnly bool) authzWant {
	switch subject {
	case subOrgAdmin:
		return allowed
	case subOrgMember:
		if read || !memberOwnOnly || res == resMels {
			return allowed
		}
		return denied
	case subOrgViewer:
		if read {
			return allowed
		}
		return denied
	}
	return hidden
}

// wantResource is the outcome of an action on a cluster or a policy of the
// path, with the default policy. Another organisation's resource is not
// found: the store scopes every query to the caller's organisation, before
// and after the decision. The agent is refused before a read is made, and
// not found where the handler reads the resource to learn its creator.
func wantResource(subject, res string, read bool, allowed authzWant, readsFirst, memberOwnOnly bool) authzWant {
	switch {
	case subject == subAgent && readsFirst:
		return hidden
	case subject == subAgent:
		return denied
	case subject == subOtherOrg && res == resBobs:
		return allowed
	case res == resBobs || subject == subOtherOrg || subject == subFleetAdmin || subject == subFleetViewer:
		return hidden
	}
	return orgAWant(subject, res, read, allowed, memberOwnOnly)
}

// wantCollection is the outcome of a list or create of the caller's
// organisation: every user may (the SREs' and bob's organisations have no
// org role, so the default, admin), but the viewer's create; the agent may not.
func wantCollection(subject string, read bool, allowed authzWant) authzWant {
	switch {
	case subject == subAgent:
		return denied
	case subject == subOrgViewer && !read:
		return denied
	}
	return allowed
}

// wantFleet is the outcome of an admin operation.
func wantFleet(subject string, read bool, allowed authzWant) authzWant {
	if subject == subFleetAdmin || (subject == subFleetViewer && read) {
		return allowed
	}
	return adminRq
}

// authzAction is one row of the table: an operation, the outcome of each
// subject on each resource, and the call.
type authzAction struct {
	name      string
	resources []string
	want      func(subject, res string) authzWant
	call      func(t *testing.T, tok, res string) (any, error)
}

// authzFixture is the resources the table acts on, made fresh for each
// deleting cell so that a cell never sees another's effect.
type authzFixture struct {
	e        *stackEnv
	tokens   map[string]string
	creators map[string]string // resource → subject that creates it
	hub      admin.Hub
	// dnsService is a DNS service that orgs A and B write.
	dnsService admin.DNSService
	n          int
}

func (fx *authzFixture) cluster(t *testing.T, res string) string {
	t.Helper()
	fx.n++
	return fx.e.createCluster(t, fx.tokens[fx.creators[res]], public.ClusterCreate{Name: fmt.Sprintf("c-%d", fx.n), Zone: ptr("eu"), Product: public.OCP}).Id
}

func (fx *authzFixture) policy(t *testing.T, res string) string {
	t.Helper()
	fx.n++
	resp, err := fx.e.client.CreatePolicyWithResponse(context.Background(), public.PolicyCreate{Zone: ptr("eu"),
		Policy: apiPolicy(fmt.Sprintf("p-%d", fx.n), "inform"), Placement: prodPlacement()}, bearer(fx.tokens[fx.creators[res]]))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreatePolicy() as %s = %s; want 201", fx.creators[res], outcome(resp, err))
	}
	return resp.JSON201.Id
}

func (fx *authzFixture) dnsRecord(t *testing.T, res string) string {
	t.Helper()
	fx.n++
	resp, err := fx.e.client.CreateDNSRecordWithResponse(context.Background(), fx.dnsService.Name, public.DNSRecordCreate{
		Instance: fmt.Sprintf("r-%d", fx.n), Targets: &[]string{"ingress.apps.authz.example.net"}}, bearer(fx.tokens[fx.creators[res]]))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateDNSRecord() as %s = %s; want 201", fx.creators[res], outcome(resp, err))
	}
	return resp.JSON201.Id
}

// wantDNSCreate is the outcome of a DNS record's create: a caller the
// policy lets create must also be one of the service's writers (the fleet
// viewer's organisation is not; fleet admins write every service's).
func wantDNSCreate(subject string) authzWant {
	if subject == subFleetViewer {
		return authzWant{http.StatusForbidden, fleet.CodeDNSWriterNotAllowed}
	}
	return wantCollection(subject, false, ok201)
}

// authzActions are the API's operations, each as the table asks it.
func authzActions(fx *authzFixture) []authzAction {
	ctx := context.Background()
	e := fx.e
	all := []string{resMels, resAdas, resBobs}
	none := []string{resNone}
	onCluster := func(read bool, allowed authzWant, readsFirst, ownOnly bool) func(string, string) authzWant {
		return func(s, r string) authzWant { return wantResource(s, r, read, allowed, readsFirst, ownOnly) }
	}
	return []authzAction{
		{"clusters:list", none, func(s, _ string) authzWant { return wantCollection(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.ListClustersWithResponse(ctx, nil, bearer(tok))
			}},
		{"clusters:create", none, func(s, _ string) authzWant { return wantCollection(s, false, ok202) },
			func(t *testing.T, tok, _ string) (any, error) {
				fx.n++
				return e.client.CreateClusterWithResponse(ctx, nil, public.ClusterCreate{Name: fmt.Sprintf("new-%d", fx.n), Zone: ptr("eu"), Product: public.OCP}, bearer(tok))
			}},
		{"clusters:get", all, onCluster(true, ok200, false, false),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.GetClusterWithResponse(ctx, fx.cluster(t, res), bearer(tok))
			}},
		{"clusters:update", all, onCluster(false, ok200, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.UpdateClusterWithResponse(ctx, fx.cluster(t, res), nil, public.ClusterPatch{DisplayName: ptr("renamed")}, bearer(tok))
			}},
		{"clusters:delete", all, onCluster(false, ok202, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.DeleteClusterWithResponse(ctx, fx.cluster(t, res), bearer(tok))
			}},
		// No hub made import material: an allowed caller finds none.
		{"clusters:import", all, onCluster(false, hidden, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.GetClusterImportWithResponse(ctx, fx.cluster(t, res), bearer(tok))
			}},
		{"policies:list", none, func(s, _ string) authzWant { return wantCollection(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.ListPoliciesWithResponse(ctx, nil, bearer(tok))
			}},
		{"policies:create", none, func(s, _ string) authzWant { return wantCollection(s, false, ok201) },
			func(t *testing.T, tok, _ string) (any, error) {
				fx.n++
				return e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: apiPolicy(fmt.Sprintf("new-%d", fx.n), "inform"),
					Placement: prodPlacement()}, bearer(tok))
			}},
		{"policies:get", all, onCluster(true, ok200, false, false),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.GetPolicyWithResponse(ctx, fx.policy(t, res), bearer(tok))
			}},
		{"policies:update", all, onCluster(false, ok200, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				id := fx.policy(t, res)
				return e.client.UpdatePolicyWithResponse(ctx, id, nil, public.PolicyUpdate{Policy: apiPolicy("p-"+id[len(id)-6:], "enforce"),
					Placement: prodPlacement()}, bearer(tok))
			}},
		{"policies:update", all, onCluster(false, ok200, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				placement := prodPlacement()
				return e.client.PatchPolicyWithResponse(ctx, fx.policy(t, res), nil, public.PolicyPatch{Placement: &placement}, bearer(tok))
			}},
		{"policies:delete", all, onCluster(false, ok204, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.DeletePolicyWithResponse(ctx, fx.policy(t, res), nil, bearer(tok))
			}},
		{"policies:compliance", all, onCluster(true, ok200, false, false),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.ListPolicyComplianceWithResponse(ctx, fx.policy(t, res), nil, bearer(tok))
			}},
		{"compliance:summary", none, func(s, _ string) authzWant { return wantCollection(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.GetComplianceSummaryWithResponse(ctx, nil, bearer(tok))
			}},
		{"inventory:list", none, func(s, _ string) authzWant { return wantCollection(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.ListManagedClustersWithResponse(ctx, nil, bearer(tok))
			}},
		{"inventory:get", none, func(s, _ string) authzWant { return wantCollection(s, true, hidden) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.GetManagedClusterWithResponse(ctx, "0190d7a4-0000-7000-8000-000000000000", bearer(tok))
			}},
		{"inventory:watch", none, func(s, _ string) authzWant { return wantCollection(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.ListManagedClusterChangesWithResponse(ctx, nil, bearer(tok))
			}},
		{"hubs:list", none, func(s, _ string) authzWant { return wantFleet(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.admin.ListHubsWithResponse(ctx, nil, adminAuth(tok))
			}},
		{"hubs:get", none, func(s, _ string) authzWant { return wantFleet(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.admin.GetHubWithResponse(ctx, fx.hub.Id, adminAuth(tok))
			}},
		{"hubs:create", none, func(s, _ string) authzWant { return wantFleet(s, false, ok201) },
			func(t *testing.T, tok, _ string) (any, error) {
				fx.n++
				return e.admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: fmt.Sprintf("hub-n%d", fx.n), Zone: "eu", Region: "eu-1",
					DeliveryMode: admin.Agent, Capacity: 1, AgentIdentity: ptr(fmt.Sprintf("hub-n%d-agent", fx.n))}, adminAuth(tok))
			}},
		{"hubs:cordon", none, func(s, _ string) authzWant { return wantFleet(s, false, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.admin.CordonHubWithResponse(ctx, fx.hub.Id, adminAuth(tok))
			}},
		{"resources:list", none, func(s, _ string) authzWant { return wantFleet(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.admin.ListResourcesWithResponse(ctx, &admin.ListResourcesParams{Kind: "Policy"}, adminAuth(tok))
			}},
		{"dns_zones:list", none, func(s, _ string) authzWant { return wantFleet(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.admin.ListDNSZonesWithResponse(ctx, nil, adminAuth(tok))
			}},
		{"dns_zones:create", none, func(s, _ string) authzWant { return wantFleet(s, false, ok201) },
			func(t *testing.T, tok, _ string) (any, error) {
				fx.n++
				return e.admin.CreateDNSZoneWithResponse(ctx, rfc2136Zone(fmt.Sprintf("z%d.zones.example.org", fx.n)), adminAuth(tok))
			}},
		{"dns_records:list", none, func(s, _ string) authzWant { return wantCollection(s, true, ok200) },
			func(t *testing.T, tok, _ string) (any, error) {
				return e.client.ListDNSRecordsWithResponse(ctx, fx.dnsService.Name, nil, bearer(tok))
			}},
		{"dns_records:create", none, func(s, _ string) authzWant { return wantDNSCreate(s) },
			func(t *testing.T, tok, _ string) (any, error) {
				fx.n++
				return e.client.CreateDNSRecordWithResponse(ctx, fx.dnsService.Name, public.DNSRecordCreate{Instance: fmt.Sprintf("new-%d", fx.n),
					Targets: &[]string{"ingress.apps.authz.example.net"}}, bearer(tok))
			}},
		{"dns_records:get", all, onCluster(true, ok200, false, false),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.GetDNSRecordWithResponse(ctx, fx.dnsService.Name, fx.dnsRecord(t, res), bearer(tok))
			}},
		{"dns_records:update", all, onCluster(false, ok200, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.UpdateDNSRecordWithResponse(ctx, fx.dnsService.Name, fx.dnsRecord(t, res), nil, public.DNSRecordPatch{Ttl: ptr(120)}, bearer(tok))
			}},
		{"dns_records:delete", all, onCluster(false, ok202, true, true),
			func(t *testing.T, tok, res string) (any, error) {
				return e.client.DeleteDNSRecordWithResponse(ctx, fx.dnsService.Name, fx.dnsRecord(t, res), nil, bearer(tok))
			}},
		// The agents' API: any other token finds no hub, as before.
		{"agent:desired", none, func(s, _ string) authzWant {
			if s == subAgent {
				return ok200
			}
			return hidden
		}, func(t *testing.T, tok, _ string) (any, error) {
			return e.agent.GetHubDesiredWithResponse(ctx, fx.hub.Id, nil, agentAuth(tok))
		}},
	}
}

// statusAndCode reads a generated response's status and, for an error,
// its code's number.
func statusAndCode(resp any) (int, fleet.ErrorCode) {
	status := resp.(response).StatusCode()
	body := reflect.ValueOf(resp).Elem().FieldByName("Body").Bytes()
	var e struct{ ID string }
	if status >= 400 && json.Unmarshal(body, &struct {
		ID *string `json:"id"`
	}{&e.ID}) == nil {
		var n int
		_, _ = fmt.Sscan(e.ID, &n)
		return status, fleet.ErrorCode(n)
	}
	return status, 0
}

// newAuthzFixture starts the flavour's server with its org roles, and mints
// the subjects' tokens.
func newAuthzFixture(t *testing.T, f flavour) *authzFixture {
	t.Helper()
	e := newStackEnv(t, f)
	roles := f.authz.OrgRoles
	fx := &authzFixture{e: e, tokens: map[string]string{
		subOrgAdmin:    e.token(t, auth.TokenRequest{OrgID: "org-a", Username: "ada", Roles: roles.OrgAdmin}),
		subOrgMember:   e.token(t, auth.TokenRequest{OrgID: "org-a", Username: "mel", Roles: roles.OrgMember}),
		subOrgViewer:   e.token(t, auth.TokenRequest{OrgID: "org-a", Username: "vic", Roles: roles.OrgViewer}),
		subOtherOrg:    e.userToken(t, "org-b", "bob"),
		subFleetAdmin:  e.adminToken(t),
		subFleetViewer: e.viewerToken(t),
		subAgent:       e.agentToken(t, "hub-1-agent"),
	}, creators: map[string]string{resMels: subOrgMember, resAdas: subOrgAdmin, resBobs: subOtherOrg}}
	fx.hub = e.createAgentHub(t, "hub-1", "eu", 100)
	fx.dnsService = e.createDNSService(t, admin.DNSServiceCreate{Name: "authz", ZoneId: e.createDNSZone(t, rfc2136Zone("authz.example.com")).Id,
		WriterOrganizations: &[]string{"org-a", "org-b"}})
	return fx
}

// TestAuthorizationTable asks every subject every action on every resource
// through the real server, with the default policy, and asserts each cell.
func TestAuthorizationTable(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fx := newAuthzFixture(t, f)
			runAuthzTable(t, fx, authzActions(fx), nil)
			denials := metricValue(t, fx.e.registry, f.http.MetricsNamespace()+"_authz_decisions_total",
				map[string]string{"action": "clusters:delete", "result": "deny"})
			if denials < 1 {
				t.Errorf("%s_authz_decisions_total{action=clusters:delete,result=deny} = %v, want at least 1", f.http.MetricsNamespace(), denials)
			}
			logged := false
			for _, line := range strings.Split(fx.e.logs.String(), "\n") {
				logged = logged || strings.Contains(line, `"msg":"authorization denied"`) && strings.Contains(line, `"action":"clusters:delete"`) &&
					strings.Contains(line, `"subject_kind":"user"`) && !strings.Contains(line, "Bearer")
			}
			if !logged {
				t.Errorf("no denial of clusters:delete logged")
			}
		})
	}
}

// runAuthzTable runs every cell; override changes the expected outcome of
// some cells.
func runAuthzTable(t *testing.T, fx *authzFixture, actions []authzAction, override func(subject, action, res string, w authzWant) authzWant) {
	t.Helper()
	for _, a := range actions {
		for _, s := range authzSubjects {
			for _, res := range a.resources {
				want := a.want(s, res)
				if override != nil {
					want = override(s, a.name, res, want)
				}
				resp, err := a.call(t, fx.tokens[s], res)
				if err != nil {
					t.Errorf("%s as %s on %s: %v", a.name, s, res, err)
					continue
				}
				status, code := statusAndCode(resp)
				if status != want.status || code != want.code {
					t.Errorf("%s as %s on %s = %d code %d, want %d code %d (%s)", a.name, s, res, status, code, want.status, want.code, outcome(resp, nil))
				}
				if want.code == fleet.CodeActionForbidden && !strings.Contains(outcome(resp, nil), a.name) {
					t.Errorf("%s as %s on %s: the reason does not name the action: %s", a.name, s, res, outcome(resp, nil))
				}
			}
		}
	}
}

// TestAuthorizationForkPolicy runs the table under a fork's policy file:
// the default policy with members no longer deleting even what they created,
// and viewers no longer reading compliance.
func TestAuthorizationForkPolicy(t *testing.T) {
	t.Parallel()
	src := authz.DefaultPolicy()
	for _, change := range [][2]string{
		{`owner_verbs := {"update", "delete", "import", "cancel"}`, `owner_verbs := {"update", "import", "cancel"}`},
		{`org_role_allows("viewer") if read_verbs[verb]`, `org_role_allows("viewer") if {
	read_verbs[verb]
	family != "compliance"
	verb != "compliance"
}`},
	} {
		if !strings.Contains(src, change[0]) {
			t.Fatalf("the default policy has no %q to change", change[0])
		}
		src = strings.Replace(src, change[0], change[1], 1)
	}
	path := filepath.Join(t.TempDir(), "fork.rego")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f := flavours()[1]
	f.name = "fork policy"
	f.authz.PolicyFile = path
	fx := newAuthzFixture(t, f)
	runAuthzTable(t, fx, authzActions(fx), func(s, action, res string, w authzWant) authzWant {
		switch {
		case s == subOrgMember && strings.HasSuffix(action, ":delete") && res == resMels:
			return denied
		case s == subOrgViewer && (action == "policies:compliance" || action == "compliance:summary"):
			return denied
		}
		return w
	})
}

// metricValue is the value of the counter name with labels in reg, 0 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather(): %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
