package agent_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/rest/apitest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/internal/stack"
	"github.com/fleetmanager/fleet-manager/openapi"
)

// deliveryEnv is a whole fleet manager on a fresh database (its API server,
// its revision watch, the reconcilers serve runs) with one agent
// hub, whose agent runs against the test hub: tenants share that hub.
type deliveryEnv struct {
	t     *testing.T
	g     gomega.Gomega
	db    *postgres.DB
	store *postgres.Store
	hub   fleet.Hub
}

func startDeliveryEnv(t *testing.T) *deliveryEnv {
	t.Helper()
	ctx := t.Context()
	db, dbCfg := pgtest.NewMigratedDatabase(t)
	keyring, err := secrets.NewKeyring(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.DefaultConfig()
	cfg.DB, cfg.HeartbeatCheck = dbCfg, time.Second
	cfg.Queue = postgres.QueueConfig{BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second}
	cfg.Reconcile.Lease, cfg.Reconcile.RemovalTimeout = 10*time.Second, time.Hour
	agentID := fmt.Sprintf("agent-iso-%x", time.Now().UnixNano())
	svc := startStack(t, cfg, stack.Parts{DB: db, Keyring: keyring, Authenticator: testAuth{agentID: agentID}})
	store := svc.Store
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-shared", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: agentID})
	if err != nil {
		t.Fatalf("CreateHub(): %v", err)
	}
	handler, err := svc.API.Handler()
	if err != nil {
		t.Fatalf("Handler(): %v", err)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)

	base := ts.URL + cfg.HTTP.BasePath
	runAgent(t, hub.ID, withBearer(apitest.ValidatingClient(t, openapi.Specs, openapi.Private, base), "agent"), base)
	return &deliveryEnv{t: t, g: gomega.NewWithT(t), db: db, store: store, hub: hub}
}

// register creates a registration of org through the store, as the API does.
func (e *deliveryEnv) register(org, name string) fleet.Registration {
	e.t.Helper()
	reg, _, err := e.store.CreateRegistration(e.t.Context(), fleet.Identity{OrgID: org, Username: "u"},
		fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP, Labels: map[string]string{"env": "prod"}}, "")
	if err != nil {
		e.t.Fatalf("CreateRegistration(%s/%s): %v", org, name, err)
	}
	return reg
}

// delivered returns the Delivered condition of org's registration id.
func (e *deliveryEnv) delivered(org, id string) fleet.Condition {
	reg, err := e.store.FindRegistration(context.Background(), org, id)
	if err != nil {
		e.t.Fatalf("FindRegistration(%s/%s): %v", org, id, err)
	}
	c, _ := reg.Conditions.Get(fleet.ConditionDelivered)
	return c
}

// eventuallyDelivered waits until org's registration id is Delivered with status.
func (e *deliveryEnv) eventuallyDelivered(org, id string, status fleet.ConditionStatus) fleet.Condition {
	e.t.Helper()
	var c fleet.Condition
	e.g.Eventually(func() fleet.ConditionStatus { c = e.delivered(org, id); return c.Status }).
		WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(gomega.Equal(status),
		func() string { return fmt.Sprintf("registration %s/%s Delivered: %+v", org, id, c) })
	return c
}

// writePolicy writes a policy row straight into the database, past the API's
// validation (as a row written before that validation was), places it on
// the hub and moves the hub's revision, as the resolver would.
func (e *deliveryEnv) writePolicy(org, name, body string) string {
	e.t.Helper()
	id := fmt.Sprintf("00000000-0000-4000-8000-%012x", time.Now().UnixNano()&0xffffffffffff)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO policies (id, org_id, zone, name, body, created_at) VALUES (?, ?, 'eu', ?, ?::jsonb, clock_timestamp())`, []any{id, org, name, body}},
		{`INSERT INTO policy_hubs (policy_id, hub_id) VALUES (?, ?)`, []any{id, e.hub.ID}},
	} {
		if err := e.db.Gorm.Exec(q.sql, q.args...).Error; err != nil {
			e.t.Fatalf("write policy %s: %v", name, err)
		}
	}
	e.moveRevision()
	return id
}

// moveRevision moves the hub's desired-set revision and wakes its agent.
func (e *deliveryEnv) moveRevision() {
	e.t.Helper()
	if err := e.db.Gorm.Exec(`UPDATE hubs SET revision = revision + 1 WHERE id = ?`, e.hub.ID).Error; err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Gorm.Exec(`SELECT pg_notify(?, ?)`, postgres.ChannelHubRevision, e.hub.ID).Error; err != nil {
		e.t.Fatal(err)
	}
}

// policyFailures returns the delivery failures org's policy id shows.
func (e *deliveryEnv) policyFailures(org, id string) []fleet.PolicyDeliveryFailure {
	p, err := e.store.FindPolicy(context.Background(), org, id)
	if err != nil {
		e.t.Fatalf("FindPolicy(%s/%s): %v", org, id, err)
	}
	return p.DeliveryFailures
}

// policyBody is a Policy the hub accepts, with metadata and a spec nested
// below its templates as given (JSON text).
func policyBody(name, metadata, nested string) string {
	return `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"Policy","metadata":{"name":"` + name + `"` + metadata + `},
"spec":{"disabled":false,"remediationAction":"inform","policy-templates":[{"objectDefinition":{"apiVersion":"policy.open-cluster-management.io/v1",
"kind":"ConfigurationPolicy","metadata":{"name":"` + name + `"},"spec":{"remediationAction":"inform","severity":"low","nested":` + nested + `}}}]}}`
}

var hubPoliciesGVR = hubkind.Policy.GVR()

// TestBadPolicyFailsOnlyItsOwner: on a hub shared by two tenants, policies
// of one tenant nested 10,000 levels deep, with an annotation key the hub's
// API server refuses, and with annotations over the API server's total (written past the
// API's validation) fail alone: both tenants' registrations are delivered,
// the other tenant's policy reaches the hub, and the bad policies' owner
// reads each failure with its reason.
func TestBadPolicyFailsOnlyItsOwner(t *testing.T) {
	t.Parallel()
	e := startDeliveryEnv(t)
	regA, regB := e.register("org-a", "tenant-a"), e.register("org-b", "tenant-b")
	deep := e.writePolicy("org-b", "deep", policyBody("deep", "", strings.Repeat(`{"a":`, 10_000)+"1"+strings.Repeat("}", 10_000)))
	badKey := e.writePolicy("org-b", "bad-key", policyBody("bad-key", `,"annotations":{"not a qualified name!":"x"}`, "1"))
	huge := e.writePolicy("org-b", "huge", policyBody("huge", `,"annotations":{"big":"`+strings.Repeat("x", 300<<10)+`"}`, "1"))
	good := e.writePolicy("org-a", "good", policyBody("good", `,"annotations":{"policy.open-cluster-management.io/standards":"NIST"}`, "1"))

	e.eventuallyDelivered("org-a", regA.ID, fleet.ConditionTrue)
	e.eventuallyDelivered("org-b", regB.ID, fleet.ConditionTrue)
	for _, tc := range []struct {
		id, reason, message string
	}{
		{deep, fleet.ReasonObjectTooDeep, "levels deep"},
		{badKey, "Invalid", "not a qualified name!"},
		{huge, "Invalid", "Too long"},
	} {
		e.g.Eventually(func() []fleet.PolicyDeliveryFailure { return e.policyFailures("org-b", tc.id) }).WithTimeout(30*time.Second).
			Should(gomega.HaveExactElements(gomega.And(gomega.HaveField("HubID", e.hub.ID), gomega.HaveField("Reason", tc.reason),
				gomega.HaveField("Message", gomega.ContainSubstring(tc.message)))), "policy %s", tc.id)
	}
	e.g.Expect(e.policyFailures("org-a", good)).To(gomega.BeEmpty(), "the other tenant's policy")
	e.g.Eventually(func() int {
		list, err := hubtest.Dynamic(t).Resource(hubPoliciesGVR).Namespace("fleet-policies").List(t.Context(),
			metav1.ListOptions{LabelSelector: fleet.LabelPolicyID + "=" + good})
		if err != nil {
			return -1
		}
		return len(list.Items)
	}).WithTimeout(30*time.Second).Should(gomega.Equal(1), "the other tenant's policy on the hub")
}

// TestRefusedRegistrationFailsOnlyItsOwner: a registration whose
// ManagedCluster the hub refuses (labels written past the API's validation)
// is not delivered, with the hub's reason, while the other tenant's on the
// same hub is; once its labels are fixed it is delivered too.
func TestRefusedRegistrationFailsOnlyItsOwner(t *testing.T) {
	t.Parallel()
	e := startDeliveryEnv(t)
	regA, regC := e.register("org-a", "tenant-a"), e.register("org-c", "tenant-c")
	// Written past the API's validation, and published in a new revision
	// as a change is: the agent takes the changes since the revision it
	// holds (ADR 0017), so a row changed without being published again
	// would reach it only with its next whole set.
	if err := e.db.Gorm.Exec(`WITH h AS (UPDATE hubs SET revision = revision + 1 WHERE id = ? RETURNING revision)
UPDATE registrations SET labels = '{"bad key!": "x"}', published_revision = h.revision FROM h WHERE registrations.id = ?`, e.hub.ID, regC.ID).Error; err != nil {
		t.Fatal(err)
	}
	e.moveRevision()

	e.eventuallyDelivered("org-a", regA.ID, fleet.ConditionTrue)
	c := e.eventuallyDelivered("org-c", regC.ID, fleet.ConditionFalse)
	e.g.Eventually(func() fleet.Condition { c = e.delivered("org-c", regC.ID); return c }).WithTimeout(30 * time.Second).Should(gomega.And(
		gomega.HaveField("Reason", "Invalid"), gomega.HaveField("Message", gomega.ContainSubstring("bad key!"))))
	e.g.Expect(e.delivered("org-a", regA.ID).Status).To(gomega.Equal(fleet.ConditionTrue), "the other tenant stays delivered")

	labels := map[string]string{"env": "prod"}
	if _, err := e.store.UpdateRegistration(t.Context(), fleet.Permitted, "org-c", regC.ID, nil, fleet.RegistrationUpdate{Labels: &labels}); err != nil {
		t.Fatalf("UpdateRegistration(): %v", err)
	}
	e.eventuallyDelivered("org-c", regC.ID, fleet.ConditionTrue)
}
