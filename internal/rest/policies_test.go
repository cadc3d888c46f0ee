package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/policyschema"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// policySchema is the Policy CRD's validator the service runs with.
func policySchema(t testing.TB) fleet.PolicyValidator {
	t.Helper()
	v, err := policyschema.New()
	if err != nil {
		t.Fatalf("policyschema.New(): %v", err)
	}
	return v
}

// apiPolicy is a valid Policy body.
func apiPolicy(name, remediation string) public.PolicyBody {
	return public.PolicyBody{
		"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"remediationAction": remediation, "disabled": false, "policy-templates": []any{
			map[string]any{"objectDefinition": map[string]any{
				"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
				"metadata": map[string]any{"name": name + "-ns"},
				"spec": map[string]any{"remediationAction": remediation, "severity": "low", "object-templates": []any{
					map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "audit"}}},
				}},
			}},
		}},
	}
}

func prodPlacement() public.PolicyPlacement {
	return public.PolicyPlacement{LabelSelector: public.LabelSelector{MatchLabels: &map[string]string{"env": "prod"}}}
}

// TestPolicyAPI drives a policy through the public API, with a customer
// hub's agent (played by the test) reporting a prod cluster and the
// compliance the policy framework wrote on the root Policy.
func TestPolicyAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			testPolicyAPI(t, newStackEnv(t, f))
		})
	}
}

func testPolicyAPI(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	hubResp, err := e.admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "hub-a", Zone: "eu", Region: "eu-1", DeliveryMode: admin.Agent,
		Capacity: 5, AgentIdentity: ptr("hub-a-agent"), OwnerOrgId: ptr("org-a")}, adminAuth(e.adminToken(t)))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hubResp.JSON201).NotTo(gomega.BeNil(), outcome(hubResp, err))
	hub, agent := *hubResp.JSON201, agentAuth(e.agentToken(t, "hub-a-agent"))
	inv, err := e.agent.PostHubInventoryWithResponse(ctx, hub.Id, private.InventoryBatch{Deletes: []string{},
		Upserts: []private.ManagedClusterSummary{{Name: "prod-1", Labels: &map[string]string{"env": "prod"}}}}, agent)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(inv.JSON200).NotTo(gomega.BeNil(), outcome(inv, err))
	tok := bearer(e.userToken(t, "org-a", "alice"))

	// A body the Policy CRD's schema refuses.
	bad := apiPolicy("audit", "sometimes")
	resp, err := e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: bad, Placement: prodPlacement()}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreatePolicy(remediationAction sometimes)", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodePolicyInvalid)
	g.Expect(resp.JSON400.Reason).To(gomega.ContainSubstring("spec.remediationAction"))
	badSelector := public.PolicyPlacement{LabelSelector: public.LabelSelector{MatchLabels: &map[string]string{"env": "not a value"}}}
	resp, err = e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: apiPolicy("audit", "inform"), Placement: badSelector}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreatePolicy(bad selector)", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	// The policy framework's root-policy label would make the root Policy
	// look like a replica on the hub.
	replica := apiPolicy("audit", "inform")
	replica["metadata"] = map[string]any{"name": "audit", "labels": map[string]any{fleet.LabelRootPolicy: "fleet-policies.audit"}}
	resp, err = e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: replica, Placement: prodPlacement()}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreatePolicy(root-policy label)", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	resp, err = e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: apiPolicy("audit", "inform"), Placement: prodPlacement()},
		bearer(e.userToken(t, "", "orgless")))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreatePolicy(no organisation)", e.apiEnv, resp.JSON403, resp.StatusCode(), http.StatusForbidden, fleet.CodeOrgNotAllowed)

	resp, err = e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: apiPolicy("audit", "inform"), Placement: prodPlacement()}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(resp.JSON201).NotTo(gomega.BeNil(), outcome(resp, err))
	p := *resp.JSON201
	g.Expect(resp.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(`"1"`))
	g.Expect(resp.HTTPResponse.Header.Get("Location")).To(gomega.Equal(p.Href))
	g.Expect(p.HubCount).To(gomega.Equal(1))
	g.Expect(*p.Placement.LabelSelector.MatchLabels).To(gomega.Equal(map[string]string{"env": "prod"}))

	// The hub's agent receives it: namespace, binding, Policy, Placement, PlacementBinding.
	desired, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{}, agent)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(desired.JSON200).NotTo(gomega.BeNil(), outcome(desired, err))
	g.Expect(*desired.JSON200.Policies).To(gomega.HaveLen(1))
	dp := (*desired.JSON200.Policies)[0]
	g.Expect(dp.PolicyId).To(gomega.Equal(p.Id))
	var kinds []string
	for _, o := range dp.Objects {
		kinds = append(kinds, o.Kind)
	}
	g.Expect(kinds).To(gomega.Equal([]string{"Namespace", "ManagedClusterSetBinding", "Policy", "Placement", "PlacementBinding"}))
	hubPolicy := dp.Objects[2].Metadata

	// The framework's status comes back on the root Policy.
	rootLabels := map[string]string{fleet.LabelPolicyID: p.Id, fleet.LabelHubID: hub.Id}
	root := private.ResourceObject{Namespace: ptr("fleet-policies"), Name: hubPolicy["name"].(string), Labels: &rootLabels,
		Body: map[string]any{"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
			"metadata": map[string]any{"name": hubPolicy["name"], "namespace": "fleet-policies"},
			"status": map[string]any{"compliant": "NonCompliant", "status": []any{
				map[string]any{"clustername": "prod-1", "clusternamespace": "prod-1", "compliant": "NonCompliant"}}}}}
	ing, err := e.agent.PostHubResourcesWithResponse(ctx, hub.Id, private.ResourceBatch{Group: "policy.open-cluster-management.io", Kind: "Policy",
		Upserts: []private.ResourceObject{root}, Deletes: []string{}}, agent)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(ing.JSON200).NotTo(gomega.BeNil(), outcome(ing, err))
	comp, err := e.client.ListPolicyComplianceWithResponse(ctx, p.Id, &public.ListPolicyComplianceParams{Search: ptr("state = 'NonCompliant'")}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(comp.JSON200).NotTo(gomega.BeNil(), outcome(comp, err))
	g.Expect(comp.JSON200.Total).To(gomega.Equal(1))
	item := comp.JSON200.Items[0]
	g.Expect([]string{item.ClusterName, item.Hub.Name, string(item.State)}).To(gomega.Equal([]string{"prod-1", "hub-a", "NonCompliant"}))
	g.Expect(item.ManagedClusterId).NotTo(gomega.BeNil(), "the inventory holds the cluster")
	sum, err := e.client.GetComplianceSummaryWithResponse(ctx, &public.GetComplianceSummaryParams{PolicyId: &p.Id}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(sum.JSON200).NotTo(gomega.BeNil(), outcome(sum, err))
	g.Expect(sum.JSON200.Counts).To(gomega.Equal(public.ComplianceCounts{NonCompliant: 1}))
	g.Expect(sum.JSON200.Zones).To(gomega.HaveLen(1))
	g.Expect(sum.JSON200.Zones[0].Zone).To(gomega.Equal("eu"))

	// Another organisation sees none of it.
	other := bearer(e.userToken(t, "org-b", "bob"))
	got, err := e.client.GetPolicyWithResponse(ctx, p.Id, other)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "GetPolicy(other org)", e.apiEnv, got.JSON404, got.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)

	// Update under If-Match.
	upd := public.PolicyUpdate{Policy: apiPolicy("audit", "enforce"), Placement: prodPlacement()}
	up, err := e.client.UpdatePolicyWithResponse(ctx, p.Id, &public.UpdatePolicyParams{IfMatch: ptr(`"5"`)}, upd, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdatePolicy(stale If-Match)", e.apiEnv, up.JSON412, up.StatusCode(), http.StatusPreconditionFailed, fleet.CodePreconditionFailed)
	up, err = e.client.UpdatePolicyWithResponse(ctx, p.Id, &public.UpdatePolicyParams{IfMatch: ptr(`"1"`)}, upd, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(up.JSON200).NotTo(gomega.BeNil(), outcome(up, err))
	g.Expect(up.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(`"2"`))
	g.Expect(up.JSON200.Policy["spec"]).To(gomega.HaveKeyWithValue("remediationAction", "enforce"))
	list, err := e.client.ListPoliciesWithResponse(ctx, &public.ListPoliciesParams{}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.JSON200).NotTo(gomega.BeNil(), outcome(list, err))
	g.Expect(list.JSON200.Total).To(gomega.Equal(1))

	del, err := e.client.DeletePolicyWithResponse(ctx, p.Id, &public.DeletePolicyParams{}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusNoContent), outcome(del, err))
	desired, err = e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{}, agent)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(*desired.JSON200.Policies).To(gomega.BeEmpty(), "a deleted policy leaves the hub's desired set")
}
