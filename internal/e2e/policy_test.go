package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// policyNamespace is the fleet manager's default --policy-namespace.
const policyNamespace = "fleet-policies"

// e2ePolicy is a Policy body that makes sure a namespace exists.
func e2ePolicy(name, remediation string) public.PolicyBody {
	return public.PolicyBody{
		"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
		"metadata": map[string]any{"name": name, "annotations": map[string]any{"policy.open-cluster-management.io/standards": "NIST SP 800-53"}},
		"spec": map[string]any{"remediationAction": remediation, "disabled": false, "policy-templates": []any{
			map[string]any{"objectDefinition": map[string]any{
				"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{"remediationAction": remediation, "severity": "low", "object-templates": []any{
					map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "audit"}}},
				}},
			}},
		}},
	}
}

// createPolicy creates a policy of the stack's user selecting env=e2e.
func (s *stack) createPolicy(name string) public.Policy {
	s.t.Helper()
	resp, err := s.fm.Public.CreatePolicyWithResponse(context.Background(), public.PolicyCreate{Zone: ptr("eu"), Policy: e2ePolicy(name, "inform"),
		Placement: public.PolicyPlacement{LabelSelector: public.LabelSelector{MatchLabels: &map[string]string{"env": "e2e"}}}}, bearer(s.user))
	if err != nil || resp.JSON201 == nil {
		s.t.Fatalf("CreatePolicy(%s) = %v %s, %v", name, resp.StatusCode(), resp.Body, err)
	}
	return *resp.JSON201
}

// hubPolicy returns the hub's root Policy of p, nil while there is none.
func (s *stack) hubPolicy(p public.Policy) *unstructured.Unstructured {
	list, err := hubtest.Dynamic(s.t).Resource(policiesGVR).Namespace(policyNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: fleet.LabelPolicyID + "=" + p.Id})
	if err != nil || len(list.Items) != 1 {
		return nil
	}
	return &list.Items[0]
}

// compliance returns the state the API reports for cluster under p.
func (s *stack) compliance(p public.Policy, cluster string) string {
	resp, err := s.fm.Public.ListPolicyComplianceWithResponse(context.Background(), p.Id,
		&public.ListPolicyComplianceParams{Search: ptr("cluster_name = '" + cluster + "'")}, bearer(s.user))
	if err != nil || resp.JSON200 == nil || len(resp.JSON200.Items) != 1 {
		return ""
	}
	return string(resp.JSON200.Items[0].State)
}

// TestPolicyPropagationAndCompliance drives configuration policies through
// the real binary, agent and hub: a policy reaches the hub as a Policy, a
// Placement and a PlacementBinding; OCM's placement controller places it on
// the cluster and the governance policy propagator replicates it there; the
// compliance the cluster reports (played by the test, see setCompliance)
// comes back through the API as the propagator aggregates it; an update and a
// deletion propagate; and a cluster whose labels no longer match takes the
// policy off its hub.
func TestPolicyPropagationAndCompliance(t *testing.T) {
	s := newStack(t, "hub-e2e-policy")
	ctx := context.Background()
	dyn := hubtest.Dynamic(t)
	c := s.register("governed")
	name := managedClusterName(c)
	s.waitPhase(c.Id, public.Ready)
	s.g.Eventually(func() int { return len(s.inventory(name)) }).WithTimeout(30*time.Second).Should(gomega.Equal(1), "cluster %s in the inventory", name)

	audit, other := s.createPolicy("audit"), s.createPolicy("other")
	s.g.Expect([]int{audit.HubCount, other.HubCount}).To(gomega.Equal([]int{1, 1}), "each policy is placed on the hub of its cluster")
	var root *unstructured.Unstructured
	s.g.Eventually(func() *unstructured.Unstructured { root = s.hubPolicy(audit); return root }).WithTimeout(30*time.Second).
		ShouldNot(gomega.BeNil(), "the hub receives the policy")
	s.g.Expect(root.GetAnnotations()).To(gomega.HaveKeyWithValue("policy.open-cluster-management.io/standards", "NIST SP 800-53"))
	// The agent applies the Policy first, then its Placement and PlacementBinding.
	var placement *unstructured.Unstructured
	s.g.Eventually(func() error {
		var err error
		placement, err = dyn.Resource(placementsGVR).Namespace(policyNamespace).Get(ctx, root.GetName(), metav1.GetOptions{})
		return err
	}).WithTimeout(30*time.Second).Should(gomega.Succeed(), "the policy's Placement")
	selector, _, _ := unstructured.NestedMap(placement.Object, "spec", "predicates")
	s.g.Expect(placement.Object["spec"]).To(gomega.HaveKeyWithValue("clusterSets", []any{"global"}), "%v", selector)
	s.g.Eventually(func() error {
		_, err := dyn.Resource(placementBindingsGVR).Namespace(policyNamespace).Get(ctx, root.GetName(), metav1.GetOptions{})
		return err
	}).WithTimeout(30*time.Second).Should(gomega.Succeed(), "the policy's PlacementBinding")

	// OCM's placement controller decides the cluster, the propagator
	// replicates the policy into its namespace and reports it pending; the
	// cluster's report (played: setCompliance) turns it NonCompliant, then
	// Compliant.
	s.g.Eventually(func() string { return s.compliance(audit, name) }).WithTimeout(60 * time.Second).Should(gomega.Equal("Pending"))
	otherName := ""
	s.g.Eventually(func() string {
		if p := s.hubPolicy(other); p != nil {
			otherName = p.GetName()
		}
		return otherName
	}).WithTimeout(30*time.Second).ShouldNot(gomega.BeEmpty(), "the hub receives the other policy")
	s.setCompliance(name, "NonCompliant", root.GetName(), otherName)
	s.g.Eventually(func() string { return s.compliance(audit, name) }).WithTimeout(30 * time.Second).Should(gomega.Equal("NonCompliant"))
	s.setCompliance(name, "Compliant", root.GetName(), otherName)
	s.g.Eventually(func() public.ComplianceCounts {
		resp, err := s.fm.Public.GetComplianceSummaryWithResponse(ctx, &public.GetComplianceSummaryParams{}, bearer(s.user))
		if err != nil || resp.JSON200 == nil {
			return public.ComplianceCounts{}
		}
		return resp.JSON200.Counts
	}).WithTimeout(30*time.Second).Should(gomega.Equal(public.ComplianceCounts{Compliant: 2}), "both policies compliant on the one cluster")

	// An update reaches the hub.
	upd, err := s.fm.Public.UpdatePolicyWithResponse(ctx, audit.Id, &public.UpdatePolicyParams{IfMatch: ptr(`"1"`)},
		public.PolicyUpdate{Policy: e2ePolicy("audit", "enforce"), Placement: audit.Placement}, bearer(s.user))
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	s.g.Expect(upd.StatusCode()).To(gomega.Equal(http.StatusOK), string(upd.Body))
	s.g.Eventually(func() string {
		p := s.hubPolicy(audit)
		if p == nil {
			return ""
		}
		v, _, _ := unstructured.NestedString(p.Object, "spec", "remediationAction")
		return v
	}).WithTimeout(30 * time.Second).Should(gomega.Equal("enforce"))

	// A deletion leaves the hub; the other policy stays.
	otherRoot := s.hubPolicy(other)
	s.g.Expect(otherRoot).NotTo(gomega.BeNil())
	del, err := s.fm.Public.DeletePolicyWithResponse(ctx, other.Id, &public.DeletePolicyParams{}, bearer(s.user))
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	s.g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusNoContent))
	s.g.Eventually(func() bool {
		_, err := dyn.Resource(placementsGVR).Namespace(policyNamespace).Get(ctx, otherRoot.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err) && s.hubPolicy(other) == nil
	}).WithTimeout(30*time.Second).Should(gomega.BeTrue(), "the deleted policy's objects leave the hub")
	s.g.Expect(s.hubPolicy(audit)).NotTo(gomega.BeNil())

	// The cluster stops matching: the policy leaves its hub.
	patch, err := s.fm.Public.UpdateClusterWithResponse(ctx, c.Id, &public.UpdateClusterParams{},
		public.ClusterPatch{Labels: &public.Labels{"env": "retired"}}, bearer(s.user))
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	s.g.Expect(patch.StatusCode()).To(gomega.Equal(http.StatusOK), string(patch.Body))
	s.g.Eventually(func() *unstructured.Unstructured { return s.hubPolicy(audit) }).WithTimeout(60*time.Second).
		Should(gomega.BeNil(), "the policy leaves a hub without a matching cluster")
	got, err := s.fm.Public.GetPolicyWithResponse(ctx, audit.Id, bearer(s.user))
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	s.g.Expect(got.JSON200.HubCount).To(gomega.BeZero())
	s.g.Expect(s.compliance(audit, name)).To(gomega.BeEmpty(), "the compliance of a hub the policy left")
}
