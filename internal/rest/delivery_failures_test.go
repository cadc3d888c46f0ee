package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// kubeObjects decodes the objects of a desired set's entry.
func kubeObjects(t testing.TB, raw []json.RawMessage) []private.KubeObject {
	t.Helper()
	out := make([]private.KubeObject, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("objects[%d]: %v", i, err)
		}
	}
	return out
}

// TestHeartbeatFailuresThroughTheAPI: through the real server, an agent's
// heartbeat reports a policy the hub refused; its owner reads the failure in
// the policy (the answer matching the spec); a heartbeat naming neither a
// registration nor a policy answers 400 without echoing what was sent; and
// one with an empty list clears the failure.
func TestHeartbeatFailuresThroughTheAPI(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newStackEnv(t, flavours()[0])
	ctx := context.Background()
	hubResp, err := e.admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "hub-f", Zone: "eu", Region: "eu-1", DeliveryMode: admin.Agent,
		Capacity: 5, AgentIdentity: ptr("hub-f-agent"), OwnerOrgId: ptr("org-f")}, adminAuth(e.adminToken(t)))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hubResp.JSON201).NotTo(gomega.BeNil(), outcome(hubResp, err))
	hub, agent := *hubResp.JSON201, agentAuth(e.agentToken(t, "hub-f-agent"))
	inv, err := e.agent.PostHubInventoryWithResponse(ctx, hub.Id, private.InventoryBatch{Deletes: []string{},
		Upserts: []private.ManagedClusterSummary{{Name: "prod-1", Labels: &map[string]string{"env": "prod"}}}}, agent)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(inv.JSON200).NotTo(gomega.BeNil(), outcome(inv, err))
	tok := bearer(e.userToken(t, "org-f", "fay"))
	created, err := e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: apiPolicy("audit", "inform"), Placement: prodPlacement()}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created.JSON201).NotTo(gomega.BeNil(), outcome(created, err))
	p := *created.JSON201
	g.Expect(p.DeliveryFailures).To(gomega.HaveValue(gomega.BeEmpty()))

	revision := e.getHub(t, hub.Id).Revision
	report := func(failures ...private.EntryFailure) *private.PutHubStatusResponse {
		failures = append([]private.EntryFailure{}, failures...)
		resp, err := e.agent.PutHubStatusWithResponse(ctx, hub.Id, private.HubStatusReport{AgentVersion: "test", AgentStartGeneration: 1,
			AppliedRevision: revision, Failures: &failures}, agent)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return resp
	}
	refused := `metadata.annotations: Invalid value: "not a qualified name!": name part must consist of alphanumeric characters`
	g.Expect(report(private.EntryFailure{PolicyId: &p.Id, Reason: "Invalid", Message: refused}).JSON200).NotTo(gomega.BeNil())
	got, err := e.client.GetPolicyWithResponse(ctx, p.Id, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.JSON200).NotTo(gomega.BeNil(), outcome(got, err))
	g.Expect(got.JSON200.DeliveryFailures).To(gomega.HaveValue(gomega.HaveExactElements(gomega.And(
		gomega.HaveField("HubId", hub.Id), gomega.HaveField("Reason", "Invalid"), gomega.HaveField("Message", refused)))))

	bad := report(private.EntryFailure{Reason: "Invalid", Message: "secret-looking text"})
	wantError(t, "PutHubStatus(a failure naming no entry)", e.apiEnv, fromPrivate(bad.JSON400), bad.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	g.Expect(string(bad.Body)).NotTo(gomega.ContainSubstring("secret-looking"))

	g.Expect(report().JSON200).NotTo(gomega.BeNil())
	got, err = e.client.GetPolicyWithResponse(ctx, p.Id, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.JSON200.DeliveryFailures).To(gomega.HaveValue(gomega.BeEmpty()), "cleared by a heartbeat without it")
}
