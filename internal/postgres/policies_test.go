package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// policyBody is a minimal valid Policy body named name.
func policyBody(name, remediation string) map[string]any {
	return map[string]any{
		"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
		"metadata": map[string]any{"name": name, "namespace": "ignored", "uid": "ignored", "labels": map[string]any{"team": "sre"}},
		"spec":     map[string]any{"remediationAction": remediation, "disabled": false, "policy-templates": []any{}},
		"status":   map[string]any{"compliant": "Compliant"},
	}
}

func prodSelector() fleet.LabelSelector {
	return fleet.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
}

func TestPolicyCRUD(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	store, _ := newStoreOn(t, nil)
	ctx := context.Background()
	orgA := fleet.Identity{OrgID: "org-a", Username: "alice"}

	p, err := store.CreatePolicy(ctx, orgA, fleet.PolicyCreate{Zone: "eu", Body: policyBody("disallow-root", "inform"), Selector: prodSelector()})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(p.Name).To(gomega.Equal("disallow-root"))
	g.Expect(p.Generation).To(gomega.Equal(int64(1)))
	g.Expect(p.CreatedBy).To(gomega.Equal("alice"))
	g.Expect(p.Body).NotTo(gomega.HaveKey("status"), "status is the hubs' to fill")
	g.Expect(p.Body["metadata"]).To(gomega.Equal(map[string]any{"name": "disallow-root", "labels": map[string]any{"team": "sre"}}))
	g.Expect(p.Selector).To(gomega.Equal(prodSelector()))

	_, err = store.CreatePolicy(ctx, orgA, fleet.PolicyCreate{Zone: "eu", Body: policyBody("disallow-root", "inform")})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNameTaken))
	_, err = store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-b"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("disallow-root", "inform")})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "names are per organisation")
	bad := fleet.LabelSelector{MatchExpressions: []fleet.LabelSelectorRequirement{{Key: "env", Operator: fleet.SelectorIn}}}
	_, err = store.CreatePolicy(ctx, orgA, fleet.PolicyCreate{Zone: "eu", Body: policyBody("other", "inform"), Selector: bad})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeValidation))

	_, err = store.FindPolicy(ctx, "org-b", p.ID)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound), "another organisation's policy")
	list, total, err := store.ListPolicies(ctx, "org-a", fleet.ListQuery{Search: "name = 'disallow-root'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(1))
	g.Expect(list[0].ID).To(gomega.Equal(p.ID))

	stale := int64(7)
	_, err = store.UpdatePolicy(ctx, fleet.Permitted, "org-a", p.ID, &stale, fleet.PolicyUpdate{Body: policyBody("disallow-root", "enforce")})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodePreconditionFailed))
	one := int64(1)
	up, err := store.UpdatePolicy(ctx, fleet.Permitted, "org-a", p.ID, &one, fleet.PolicyUpdate{Body: policyBody("disallow-root", "enforce")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(up.Generation).To(gomega.Equal(int64(2)))
	g.Expect(up.Body["spec"]).To(gomega.HaveKeyWithValue("remediationAction", "enforce"))
	g.Expect(up.Selector).To(gomega.Equal(fleet.LabelSelector{}), "the update replaces the placement")

	g.Expect(fleet.ErrorCodeOf(store.DeletePolicy(ctx, fleet.Permitted, "org-a", p.ID, &one))).To(gomega.Equal(fleet.CodePreconditionFailed))
	g.Expect(store.DeletePolicy(ctx, fleet.Permitted, "org-b", p.ID, nil)).To(gomega.MatchError(gomega.ContainSubstring("not found")))
	g.Expect(store.DeletePolicy(ctx, fleet.Permitted, "org-a", p.ID, nil)).To(gomega.Succeed())
	_, err = store.FindPolicy(ctx, "org-a", p.ID)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	_, err = store.CreatePolicy(ctx, orgA, fleet.PolicyCreate{Zone: "eu", Body: policyBody("disallow-root", "inform")})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "a deleted policy's name is free again")
}

func TestPolicyZoneNotServed(t *testing.T) {
	t.Parallel()
	store, _ := newStoreOn(t, func(c *postgres.StoreConfig) {
		c.Zones = fleet.Zones{Served: []string{"eu"}, Deployments: map[string]string{"us": "https://fleet.us.example.com"}}
	})
	_, err := store.CreatePolicy(context.Background(), fleet.Identity{OrgID: "org-a"},
		fleet.PolicyCreate{Zone: "us", Body: policyBody("p", "inform")})
	if fleet.ErrorCodeOf(err) != fleet.CodeZoneNotServed || fleet.ErrorDetailsOf(err)[fleet.DetailDeploymentURL] != "https://fleet.us.example.com" {
		t.Fatalf("CreatePolicy(zone us) = %v (details %v), want ZoneNotServed naming the us deployment", err, fleet.ErrorDetailsOf(err))
	}
}

// policyEnv is an inventory with org-a's cluster "linked" (env=prod) on the
// shared hub and org-c's "customer" (env=prod) on org-c's own hub.
type policyEnv struct {
	*inventoryEnv
	owned fleet.Hub
	reg   fleet.Registration
}

func newPolicyEnv(t *testing.T) *policyEnv {
	t.Helper()
	e := &policyEnv{inventoryEnv: newInventoryEnv(t)}
	ctx := context.Background()
	var err error
	e.owned, err = e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-owned", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-owned", OwnerOrgID: "org-c"})
	if err != nil {
		t.Fatal(err)
	}
	e.reg, _, err = e.store.CreateRegistration(ctx, fleet.Identity{OrgID: "org-a", Username: "u"},
		fleet.RegistrationCreate{Name: "mine", Zone: "eu", Product: fleet.ProductOCP}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, e.hub.ID, e.reg.ID).Error; err != nil {
		t.Fatal(err)
	}
	linked := cluster("linked", "4")
	linked.Labels[fleet.LabelRegistrationID] = e.reg.ID
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked, cluster("unregistered", "4")}})
	if _, err := e.store.IngestInventory(ctx, e.owned.ID, "agent-owned", fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("customer", "4")}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// desiredPolicies returns the ids of the policies in a hub's desired set and its revision.
func (e *policyEnv) desiredPolicies(hubID, agent string) ([]string, int64, []fleet.DesiredPolicy) {
	e.t.Helper()
	set, err := e.store.DesiredSet(context.Background(), hubID, agent)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, p := range set.Policies {
		ids = append(ids, p.PolicyID)
	}
	return ids, set.Revision, set.Policies
}

// desiredObject is the object of kind among a desired policy's, or nil.
func desiredObject(p fleet.DesiredPolicy, kind string) map[string]any {
	for _, o := range p.Objects {
		if o["kind"] == kind {
			return o
		}
	}
	return nil
}

func placementSelector(p fleet.DesiredPolicy) any {
	o := desiredObject(p, "Placement")
	return o["spec"].(map[string]any)["predicates"].([]any)[0].(map[string]any)["requiredClusterSelector"].(map[string]any)["labelSelector"]
}

func TestPoliciesArePlacedOnTheHubsOfTheirClusters(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newPolicyEnv(t)
	ctx := context.Background()
	_, sharedRev, _ := e.desiredPolicies(e.hub.ID, "agent-1")

	pa, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-a"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("a", "inform"), Selector: prodSelector()})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	pc, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-c"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("c", "inform"), Selector: prodSelector()})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	none, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-a"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("none", "inform"),
		Selector: fleet.LabelSelector{MatchExpressions: []fleet.LabelSelectorRequirement{{Key: "env", Operator: fleet.SelectorNotIn, Values: []string{"prod"}}}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	other, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-b"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("b", "inform")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect([]int{pa.Hubs, pc.Hubs, none.Hubs, other.Hubs}).To(gomega.Equal([]int{1, 1, 0, 0}),
		"org-b has no cluster; org-a's NotIn prod matches none of its clusters")

	shared, rev, policies := e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(shared).To(gomega.Equal([]string{pa.ID}), "the shared hub holds org-a's policy only")
	g.Expect(rev).To(gomega.BeNumerically(">", sharedRev), "placing a policy moves the hub's revision")
	g.Expect(placementSelector(policies[0])).To(gomega.Equal(map[string]any{
		"matchLabels": map[string]any{"env": "prod", fleet.LabelOrgID: "org-a"}}), "on a shared hub the org's label narrows the Placement")
	owned, _, policies := e.desiredPolicies(e.owned.ID, "agent-owned")
	g.Expect(owned).To(gomega.Equal([]string{pc.ID}))
	g.Expect(placementSelector(policies[0])).To(gomega.Equal(map[string]any{"matchLabels": map[string]any{"env": "prod"}}),
		"on the org's own hub every cluster is the org's")

	// The inventory moves: org-a's cluster is no longer prod.
	moved := cluster("linked", "4")
	moved.Labels = map[string]string{"env": "dev", fleet.LabelRegistrationID: e.reg.ID}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{moved}})
	_, before, _ := e.desiredPolicies(e.hub.ID, "agent-1")
	n, err := e.store.ResolvePolicies(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal(2), "a leaves the shared hub; none joins it")
	shared, after, _ := e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(shared).To(gomega.Equal([]string{none.ID}))
	g.Expect(after).To(gomega.Equal(before + 2))
	n, err = e.store.ResolvePolicies(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.BeZero(), "a settled placement moves nothing")

	g.Expect(e.store.DeletePolicy(ctx, fleet.Permitted, "org-a", none.ID, nil)).To(gomega.Succeed())
	shared, _, _ = e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(shared).To(gomega.BeEmpty(), "a deleted policy leaves the desired set")
}

// rootPolicy is the hub's root Policy of p as the agent reports it, with the
// policy framework's per-cluster status.
func rootPolicy(p fleet.Policy, hubID string, status ...map[string]any) fleet.ResourceObject {
	name := fleet.HubPolicyName(p, "fleet-policies")
	labels := map[string]string{fleet.LabelPolicyID: p.ID, fleet.LabelHubID: hubID, fleet.LabelManagedBy: fleet.ManagedByAgent}
	statuses := make([]any, len(status))
	for i, s := range status {
		statuses[i] = s
	}
	bodyLabels := map[string]any{}
	for k, v := range labels {
		bodyLabels[k] = v
	}
	return fleet.ResourceObject{Namespace: "fleet-policies", Name: name, UID: "uid-" + name, ResourceVersion: "1", Labels: labels,
		Body: map[string]any{"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
			"metadata": map[string]any{"namespace": "fleet-policies", "name": name, "labels": bodyLabels},
			"spec":     map[string]any{"remediationAction": "inform", "disabled": false},
			"status":   map[string]any{"status": statuses}}}
}

func state(cluster, compliant string) map[string]any {
	s := map[string]any{"clustername": cluster, "clusternamespace": cluster}
	if compliant != "" {
		s["compliant"] = compliant
	}
	return s
}

func TestComplianceComesFromTheRootPolicysStatus(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newPolicyEnv(t)
	ctx := context.Background()
	p, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-a"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("a", "inform"), Selector: prodSelector()})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	root := rootPolicy(p, e.hub.ID, state("linked", "NonCompliant"), state("unregistered", "Compliant"), state("new", ""))
	replicated := rootPolicy(p, e.hub.ID, state("linked", "Compliant"))
	replicated.Namespace, replicated.Name = "linked", "fleet-policies."+root.Name
	replicated.Labels[fleet.LabelRootPolicy] = "fleet-policies." + root.Name
	foreign := rootPolicy(p, "another-hub", state("linked", "Compliant"))
	foreign.Name = "foreign"
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{root, replicated, foreign}})

	rows, total, err := e.store.ListCompliance(ctx, "org-a", p.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	// "unregistered" is in the inventory but not org-a's to see (a shared hub's
	// cluster without org-a's registration): the inventory's visibility rule
	// keeps it, its state and its id out, as it keeps them out of the inventory.
	g.Expect(total).To(gomega.Equal(2), "one row per cluster of the root policy org-a may see; the replicated and another hub's are ignored")
	got := map[string]fleet.ComplianceState{}
	for _, r := range rows {
		got[r.ClusterName] = r.State
		g.Expect(r.Hub.ID).To(gomega.Equal(e.hub.ID))
	}
	g.Expect(got).To(gomega.Equal(map[string]fleet.ComplianceState{"linked": fleet.NonCompliant, "new": fleet.Pending}))
	linked := rows[slices.IndexFunc(rows, func(r fleet.ClusterCompliance) bool { return r.ClusterName == "linked" })]
	g.Expect(linked.RegistrationID).To(gomega.Equal(e.reg.ID))
	g.Expect(linked.ManagedClusterID).NotTo(gomega.BeEmpty())

	// A hub's agent reporting for a policy not placed on its hub is ignored.
	elsewhere, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-a"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("b", "inform"),
		Selector: fleet.LabelSelector{MatchLabels: map[string]string{"env": "nowhere"}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{rootPolicy(elsewhere, e.hub.ID, state("linked", "Compliant"))}})
	_, total, err = e.store.ListCompliance(ctx, "org-a", elsewhere.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.BeZero(), "compliance of a policy the hub was not given")

	found, total, err := e.store.ListCompliance(ctx, "org-a", p.ID, fleet.ListQuery{Search: "state = 'NonCompliant'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(1))
	g.Expect(found[0].ClusterName).To(gomega.Equal("linked"))
	_, _, err = e.store.ListCompliance(ctx, "org-b", p.ID, fleet.ListQuery{})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound), "another organisation's policy")

	// The framework moves: linked becomes compliant, "new" leaves.
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{rootPolicy(p, e.hub.ID, state("linked", "Compliant"), state("unregistered", "Compliant"))}})
	sum, err := e.store.ComplianceSummary(ctx, "org-a", p.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(sum.ComplianceCounts).To(gomega.Equal(fleet.ComplianceCounts{Compliant: 1}), "linked; not the cluster org-a may not see")
	g.Expect(sum.Hubs).To(gomega.HaveLen(1))
	g.Expect(sum.Hubs[0].Hub.Name).To(gomega.Equal("hub-1"))
	g.Expect(sum.Zones).To(gomega.Equal([]fleet.ZoneCompliance{{Zone: "eu", ComplianceCounts: fleet.ComplianceCounts{Compliant: 1}}}))
	all, err := e.store.ComplianceSummary(ctx, "org-a", "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(all.ComplianceCounts).To(gomega.Equal(sum.ComplianceCounts))
	nobody, err := e.store.ComplianceSummary(ctx, "org-b", "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(nobody.ComplianceCounts).To(gomega.Equal(fleet.ComplianceCounts{}), "another organisation sees none of it")

	// The hub drops the policy: its compliance goes with it.
	e.ingestResources(fleet.ResourceBatch{Deletes: []string{root.Namespace + "/" + root.Name}})
	_, total, err = e.store.ListCompliance(ctx, "org-a", p.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.BeZero())
}
