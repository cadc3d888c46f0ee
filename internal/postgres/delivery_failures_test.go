package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// insertPolicyRow writes a policy straight into the database, past the API's
// validation (as a row written before that validation was), placed on hubID.
func insertPolicyRow(t *testing.T, db *postgres.DB, id, org, hubID, body string) {
	t.Helper()
	if err := db.Gorm.Exec(`INSERT INTO policies (id, org_id, zone, name, body, created_at) VALUES (?, ?, 'eu', ?, ?::jsonb, clock_timestamp())`,
		id, org, id, body).Error; err != nil {
		t.Fatalf("insert policy %s: %v", id, err)
	}
	if err := db.Gorm.Exec(`INSERT INTO policy_hubs (policy_id, hub_id) VALUES (?, ?)`, id, hubID).Error; err != nil {
		t.Fatalf("place policy %s: %v", id, err)
	}
}

// nestedBody is a Policy body whose spec nests depth levels deep.
func nestedBody(name string, depth int) string {
	return `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"Policy","metadata":{"name":"` + name + `"},"spec":` +
		strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`
}

// TestDesiredSetFailsOnlyTheUnreadablePolicy: a policy row nested 10,000
// levels deep, and one whose body is not an object, written past the API's
// validation, make the hub's desired set carry their failures instead of
// their objects; the set itself, and the other policy, are as before.
func TestDesiredSetFailsOnlyTheUnreadablePolicy(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newInventoryEnv(t)
	insertPolicyRow(t, e.db, "p-good", "org-a", e.hub.ID, nestedBody("good", 3))
	insertPolicyRow(t, e.db, "p-deep", "org-b", e.hub.ID, nestedBody("deep", 10_000))
	insertPolicyRow(t, e.db, "p-string", "org-b", e.hub.ID, `"not a policy"`)

	set, err := e.store.DesiredSet(context.Background(), e.hub.ID, "agent-1")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "DesiredSet()")
	g.Expect(set.Policies).To(gomega.HaveLen(3))
	good, deep, str := set.Policies[0], set.Policies[1], set.Policies[2]
	g.Expect([]string{good.PolicyID, deep.PolicyID, str.PolicyID}).To(gomega.Equal([]string{"p-good", "p-deep", "p-string"}))
	g.Expect(good.Failure).To(gomega.BeNil())
	g.Expect(good.Objects).To(gomega.HaveLen(5))
	g.Expect(deep.Objects).To(gomega.BeEmpty())
	g.Expect(deep.Failure).NotTo(gomega.BeNil())
	g.Expect(deep.Failure.Reason).To(gomega.Equal(fleet.ReasonObjectTooDeep))
	g.Expect(deep.Failure.Message).To(gomega.ContainSubstring("10001 levels deep"))
	g.Expect(str.Failure).NotTo(gomega.BeNil())
	g.Expect(str.Failure.Reason).To(gomega.Equal(fleet.ReasonObjectUnreadable))

	// Their owner still reads them (the body as a stub naming the policy),
	// lists them, and deletes them.
	ctx := context.Background()
	p, err := e.store.FindPolicy(ctx, "org-b", "p-deep")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "FindPolicy(p-deep)")
	g.Expect(p.Body).To(gomega.HaveKeyWithValue("metadata", map[string]any{"name": "p-deep"}))
	list, total, err := e.store.ListPolicies(ctx, "org-b", fleet.ListQuery{Page: 1, Size: 10})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "ListPolicies(org-b)")
	g.Expect([]any{len(list), total}).To(gomega.Equal([]any{2, 2}))
	g.Expect(e.store.DeletePolicy(ctx, fleet.Permitted, "org-b", "p-deep", nil)).To(gomega.Succeed())
}

// TestHeartbeatFailuresFailOnlyTheirOwner: an agent acknowledges a revision
// with one registration and one policy failed; the other registration is
// delivered, the failed one is not, with the hub's reason, and the policy's
// owner reads the failure. Failures stay while the agent says nothing of
// them and go when it reports none.
func TestHeartbeatFailuresFailOnlyTheirOwner(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	e := newInventoryEnv(t)
	delivery := postgres.NewAgentDelivery(e.store)
	place := func(org, name string) fleet.Registration {
		reg, _, err := e.store.CreateRegistration(ctx, fleet.Identity{OrgID: org, Username: "u"},
			fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, e.hub.ID, reg.ID).Error).To(gomega.Succeed())
		report, err := delivery.Deliver(ctx, e.hub, reg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(report.Done).To(gomega.BeFalse(), "published, not acknowledged yet")
		return reg
	}
	good, bad := place("org-a", "good"), place("org-b", "bad")
	insertPolicyRow(t, e.db, "p-bad", "org-b", e.hub.ID, nestedBody("bad", 3))
	hub, err := e.store.FindHub(ctx, e.hub.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	heartbeat := func(reported bool, failures ...fleet.DeliveryFailure) {
		t.Helper()
		_, err := e.store.RecordHubHeartbeat(ctx, hub.ID, "agent-1", fleet.HubHeartbeat{AgentVersion: "v", AgentStartGeneration: 1,
			AppliedRevision: hub.Revision, FailuresReported: reported, Failures: failures})
		g.Expect(err).NotTo(gomega.HaveOccurred(), "RecordHubHeartbeat()")
	}
	deliver := func(reg fleet.Registration) fleet.DeliveryReport {
		t.Helper()
		report, err := delivery.Deliver(ctx, hub, reg)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "Deliver(%s)", reg.Name)
		return report
	}
	policyFailures := func() []fleet.PolicyDeliveryFailure {
		t.Helper()
		p, err := e.store.FindPolicy(ctx, "org-b", "p-bad")
		g.Expect(err).NotTo(gomega.HaveOccurred(), "FindPolicy()")
		return p.DeliveryFailures
	}

	refused := `metadata.labels: Invalid value: "bad key!": name part must consist of alphanumeric characters` + "\x00\n"
	heartbeat(true,
		fleet.DeliveryFailure{RegistrationID: bad.ID, Reason: "Invalid", Message: refused},
		fleet.DeliveryFailure{PolicyID: "p-bad", Reason: "not a reason!", Message: strings.Repeat("é", 2000)})
	g.Expect(deliver(good)).To(gomega.HaveField("Done", true))
	report := deliver(bad)
	g.Expect(report.Done).To(gomega.BeFalse(), "the registration the hub refused")
	g.Expect(report.Reason).To(gomega.Equal("Invalid"))
	g.Expect(report.Message).To(gomega.ContainSubstring(`could not apply it at revision`))
	g.Expect(report.Message).To(gomega.ContainSubstring(`Invalid value: "bad key!"`))
	g.Expect(report.Message).NotTo(gomega.ContainSubstring("\x00"), "control characters are dropped")
	failures := policyFailures()
	g.Expect(failures).To(gomega.HaveLen(1))
	g.Expect(failures[0].HubID).To(gomega.Equal(hub.ID))
	g.Expect(failures[0].Reason).To(gomega.Equal(fleet.ReasonApplyRefused), "a reason that is not a condition reason is replaced")
	g.Expect(len(failures[0].Message)).To(gomega.BeNumerically("<=", fleet.MaxFailureMessage))
	since := failures[0].Since

	// A heartbeat without failures (an older agent, or one not done with a
	// pass) leaves them; the same failure again keeps its start.
	heartbeat(false)
	g.Expect(deliver(bad)).To(gomega.HaveField("Done", false))
	heartbeat(true,
		fleet.DeliveryFailure{RegistrationID: bad.ID, Reason: "Invalid", Message: refused},
		fleet.DeliveryFailure{PolicyID: "p-bad", Reason: "not a reason!", Message: strings.Repeat("é", 2000)})
	g.Expect(policyFailures()).To(gomega.HaveExactElements(gomega.HaveField("Since", since)))
	// A failure another hub reported is not this hub's (revisions are per hub).
	g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET delivery_failure = jsonb_set(delivery_failure, '{hub_id}', '"another-hub"') WHERE id = ?`,
		bad.ID).Error).To(gomega.Succeed())
	g.Expect(deliver(bad)).To(gomega.HaveField("Done", true))

	// The entries applied at last: their failures go.
	heartbeat(true)
	g.Expect(deliver(bad)).To(gomega.HaveField("Done", true))
	g.Expect(policyFailures()).To(gomega.BeEmpty())
}
