package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// The policy kinds the tests read on the hub.
var (
	policyGVR            = hubkind.Policy.GVR()
	placementGVR         = hubkind.Placement.GVR()
	placementBindingGVR  = hubkind.PlacementBinding.GVR()
	clusterSetBindingGVR = hubkind.ManagedClusterSetBinding.GVR()
)

// policySeq keeps the policy ids of one test binary distinct.
var policySeq atomic.Int64

// newPolicyTest returns an applier for a hub id of its own on the shared
// test hub, an admin client, and a policy namespace of its own.
func newPolicyTest(t *testing.T) (*applier, dynamic.Interface, fleet.PolicyHubConfig) {
	t.Helper()
	h := hubtest.Start(t)
	hub, err := NewHub(deployAgentAccount(t).config)
	if err != nil {
		t.Fatal(err)
	}
	a := &applier{hub: hub, hubID: uniqueHubID("hub"), fieldManager: "fleetshard-sync", deletionTimeout: 30 * time.Second, logger: testLogger()}
	cfg := fleet.PolicyHubConfig{Namespace: fmt.Sprintf("policies-%x", time.Now().UnixNano()), ClusterSet: "global"}
	return a, h.NewDynamicFor(t), cfg
}

// testPolicy returns an organisation's policy of a new id with the given
// remediation action, selecting the clusters labelled env=prod.
func testPolicy(name, remediation string) fleet.Policy {
	n := time.Now().UnixNano() + policySeq.Add(1)*1000003
	id := fmt.Sprintf("9b0e4d2a-0000-4000-8000-%012x", n&0xffffffffffff)
	body := map[string]any{
		"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
		"metadata": map[string]any{"name": name, "labels": map[string]any{"team": "platform"}},
		"spec": map[string]any{
			"disabled": false, "remediationAction": remediation,
			"policy-templates": []any{map[string]any{"objectDefinition": map[string]any{
				"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
				"metadata": map[string]any{"name": name + "-config"},
				"spec":     map[string]any{"remediationAction": "inform", "severity": "low"},
			}}},
		},
	}
	return fleet.Policy{ID: id, OrgID: "org-p", Name: name, Body: body, Generation: 1,
		Selector: fleet.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
}

// desiredPolicy renders a policy's hub objects as the fleet manager does, in
// the private API's shape.
func desiredPolicy(t *testing.T, p fleet.Policy, hubID string, cfg fleet.PolicyHubConfig) private.DesiredPolicy {
	t.Helper()
	rendered := fleet.PolicyHubObjects(p, hubID, false, cfg)
	objects := rawObjects(t, rendered.Objects...)
	return private.DesiredPolicy{PolicyId: rendered.PolicyID, Generation: rendered.Generation, Objects: objects}
}

// policySet returns a desired set of the given registrations and policies.
func policySet(regs []private.DesiredRegistration, policies ...private.DesiredPolicy) *private.DesiredSet {
	return &private.DesiredSet{Revision: time.Now().UnixNano(), Registrations: regs, Policies: &policies}
}

// expectPolicyObjects checks the hub holds p's Policy, Placement and
// PlacementBinding with the labels that let the agent find them again, and
// returns the Policy.
func expectPolicyObjects(t *testing.T, admin dynamic.Interface, p fleet.Policy, hubID string, cfg fleet.PolicyHubConfig) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	name := fleet.HubPolicyName(p, cfg.Namespace)
	want := map[string]string{fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelHubID: hubID, fleet.LabelPolicyID: p.ID, fleet.LabelOrgID: p.OrgID}
	var policy *unstructured.Unstructured
	for _, gvr := range []schema.GroupVersionResource{policyGVR, placementGVR, placementBindingGVR} {
		obj, err := get(ctx, admin, gvr, cfg.Namespace, name)
		if err != nil {
			t.Errorf("%s %s/%s: %v", gvr.Resource, cfg.Namespace, name, err)
			continue
		}
		for k, v := range want {
			if got := obj.GetLabels()[k]; got != v {
				t.Errorf("%s %s/%s label %s = %q, want %q", gvr.Resource, cfg.Namespace, name, k, got, v)
			}
		}
		switch gvr {
		case policyGVR:
			policy = obj
		case placementGVR:
			preds, _, _ := unstructured.NestedSlice(obj.Object, "spec", "predicates")
			var sel map[string]any
			if len(preds) == 1 {
				sel, _, _ = unstructured.NestedMap(preds[0].(map[string]any), "requiredClusterSelector", "labelSelector")
			}
			wantSel := map[string]any{"matchLabels": map[string]any{"env": "prod", fleet.LabelOrgID: p.OrgID}}
			if !equalJSON(sel, wantSel) {
				t.Errorf("Placement %s/%s labelSelector = %v, want %v", cfg.Namespace, name, sel, wantSel)
			}
		case placementBindingGVR:
			if ref, _, _ := unstructured.NestedString(obj.Object, "placementRef", "name"); ref != name {
				t.Errorf("PlacementBinding %s/%s placementRef.name = %q, want %q", cfg.Namespace, name, ref, name)
			}
		}
	}
	return policy
}

// equalJSON says whether a and b marshal alike.
func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// expectGone waits until the hub no longer holds the object.
func expectGone(g *gomega.WithT, ctx context.Context, admin dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) {
	g.Eventually(func() bool {
		_, err := get(ctx, admin, gvr, ns, name)
		return apierrors.IsNotFound(err)
	}).WithTimeout(10*time.Second).Should(gomega.BeTrue(), "%s %s/%s should be deleted", gvr.Resource, ns, name)
}

// expectPolicyGone waits until p's three own objects are deleted.
func expectPolicyGone(g *gomega.WithT, ctx context.Context, admin dynamic.Interface, p fleet.Policy, cfg fleet.PolicyHubConfig) {
	name := fleet.HubPolicyName(p, cfg.Namespace)
	for _, gvr := range []schema.GroupVersionResource{policyGVR, placementGVR, placementBindingGVR} {
		expectGone(g, ctx, admin, gvr, cfg.Namespace, name)
	}
}

// expectSharedObjects checks the policy namespace and its
// ManagedClusterSetBinding are there, labelled with the hub but no policy.
func expectSharedObjects(t *testing.T, admin dynamic.Interface, hubID string, cfg fleet.PolicyHubConfig) {
	t.Helper()
	ns, err := get(t.Context(), admin, namespaceGVR, "", cfg.Namespace)
	if err != nil || ns.GetDeletionTimestamp() != nil {
		t.Fatalf("policy namespace %s = %v, %v; want it there", cfg.Namespace, ns, err)
	}
	binding, err := get(t.Context(), admin, clusterSetBindingGVR, cfg.Namespace, cfg.ClusterSet)
	if err != nil {
		t.Fatalf("ManagedClusterSetBinding %s/%s: %v", cfg.Namespace, cfg.ClusterSet, err)
	}
	if set, _, _ := unstructured.NestedString(binding.Object, "spec", "clusterSet"); set != cfg.ClusterSet {
		t.Errorf("ManagedClusterSetBinding spec.clusterSet = %q, want %q", set, cfg.ClusterSet)
	}
	for _, obj := range []*unstructured.Unstructured{ns, binding} {
		l := obj.GetLabels()
		if l[fleet.LabelManagedBy] != fleet.ManagedByAgent || l[fleet.LabelHubID] != hubID || l[fleet.LabelPolicyID] != "" {
			t.Errorf("%s %s labels = %v, want managed-by and hub id %s, no policy id", obj.GetKind(), obj.GetName(), l, hubID)
		}
	}
}

func TestApplySetAppliesUpdatesAndRemovesPolicies(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	a, admin, cfg := newPolicyTest(t)

	suffix := fmt.Sprintf("%012x", time.Now().UnixNano())
	reg := fleet.Registration{ID: "6c3a8e10-0000-4000-8000-" + suffix[len(suffix)-12:], OrgID: "org-p", Name: "delta"}
	regs := []private.DesiredRegistration{desiredRegistration(t, reg, a.hubID, nil)}
	p1, p2 := testPolicy("require-labels", "inform"), testPolicy("audit-logging", "inform")

	// Both policies and the registration are applied, with the shared objects.
	g.Expect(applyAll(ctx, a, policySet(regs, desiredPolicy(t, p1, a.hubID, cfg), desiredPolicy(t, p2, a.hubID, cfg)))).To(gomega.Succeed())
	if _, err := get(ctx, admin, managedClusterGVR, "", fleet.ManagedClusterName(reg)); err != nil {
		t.Errorf("ManagedCluster of the registration: %v", err)
	}
	expectSharedObjects(t, admin, a.hubID, cfg)
	policy := expectPolicyObjects(t, admin, p1, a.hubID, cfg)
	expectPolicyObjects(t, admin, p2, a.hubID, cfg)
	if policy != nil && policy.GetLabels()["team"] != "platform" {
		t.Errorf("Policy labels = %v, want the body's team=platform kept", policy.GetLabels())
	}

	// A changed spec is applied.
	p1.Body["spec"].(map[string]any)["remediationAction"] = "enforce"
	g.Expect(applyAll(ctx, a, policySet(regs, desiredPolicy(t, p1, a.hubID, cfg), desiredPolicy(t, p2, a.hubID, cfg)))).To(gomega.Succeed())
	if policy = expectPolicyObjects(t, admin, p1, a.hubID, cfg); policy == nil {
		t.FailNow()
	}
	if got, _, _ := unstructured.NestedString(policy.Object, "spec", "remediationAction"); got != "enforce" {
		t.Errorf("Policy %s spec.remediationAction = %q, want enforce", policy.GetName(), got)
	}

	// A policy renamed: its objects under the old name go.
	renamed := p2
	renamed.Name = "audit-logging-v2"
	g.Expect(applyAll(ctx, a, policySet(regs, desiredPolicy(t, p1, a.hubID, cfg), desiredPolicy(t, renamed, a.hubID, cfg)))).To(gomega.Succeed())
	expectPolicyGone(g, ctx, admin, p2, cfg)
	expectPolicyObjects(t, admin, renamed, a.hubID, cfg)

	// A policy that left the set: its three objects go, the rest stays.
	g.Expect(applyAll(ctx, a, policySet(regs, desiredPolicy(t, p1, a.hubID, cfg)))).To(gomega.Succeed())
	expectPolicyGone(g, ctx, admin, renamed, cfg)
	expectPolicyObjects(t, admin, p1, a.hubID, cfg)
	expectSharedObjects(t, admin, a.hubID, cfg)
	if _, err := get(ctx, admin, managedClusterGVR, "", fleet.ManagedClusterName(reg)); err != nil {
		t.Errorf("ManagedCluster of the registration after a policy left: %v, want it kept", err)
	}

	// An empty set: the last policy goes too; the shared objects stay.
	g.Expect(applyAll(ctx, a, &private.DesiredSet{Revision: time.Now().UnixNano()})).To(gomega.Succeed())
	expectPolicyGone(g, ctx, admin, p1, cfg)
	expectSharedObjects(t, admin, a.hubID, cfg)
}

// TestApplySetKeepsPolicyObjectsItDoesNotOwn puts beside the agent's own
// stale policy objects some of the same kinds it must never delete: another
// hub's, unlabelled ones, and a policy the framework replicated from one of
// the agent's.
func TestApplySetKeepsPolicyObjectsItDoesNotOwn(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	a, admin, cfg := newPolicyTest(t)

	kept, stale := testPolicy("kept", "inform"), testPolicy("stale", "inform")
	g.Expect(applyAll(ctx, a, policySet(nil, desiredPolicy(t, kept, a.hubID, cfg), desiredPolicy(t, stale, a.hubID, cfg)))).To(gomega.Succeed())

	// Another hub's agent, on the same API server, applied the same kinds.
	otherHub := uniqueHubID("other-hub")
	foreign := testPolicy("foreign", "inform")
	for _, o := range desiredPolicy(t, foreign, otherHub, cfg).Objects[2:] {
		create(t, admin, fromJSON(t, string(o)))
	}
	// A Policy labelled with this hub but with no policy id.
	unlabelled := policyObject(t, stale, cfg.Namespace, "unlabelled", map[string]string{fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelHubID: a.hubID})
	create(t, admin, unlabelled)
	// The framework's copy of the stale policy in a cluster's namespace.
	clusterNS := fmt.Sprintf("cluster-%x", time.Now().UnixNano())
	create(t, admin, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": clusterNS}}})
	staleName := fleet.HubPolicyName(stale, cfg.Namespace)
	replicatedLabels := map[string]string{fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelHubID: a.hubID, fleet.LabelPolicyID: stale.ID,
		fleet.LabelRootPolicy: cfg.Namespace + "." + staleName}
	replicated := policyObject(t, stale, clusterNS, cfg.Namespace+"."+staleName, replicatedLabels)
	create(t, admin, replicated)

	g.Expect(applyAll(ctx, a, policySet(nil, desiredPolicy(t, kept, a.hubID, cfg)))).To(gomega.Succeed())
	expectPolicyGone(g, ctx, admin, stale, cfg)
	expectPolicyObjects(t, admin, kept, a.hubID, cfg)
	expectPolicyObjects(t, admin, foreign, otherHub, cfg)
	for _, obj := range []*unstructured.Unstructured{unlabelled, replicated} {
		if got, err := get(ctx, admin, policyGVR, obj.GetNamespace(), obj.GetName()); err != nil || got.GetDeletionTimestamp() != nil {
			t.Errorf("Policy %s/%s after the removal pass: %v, %v; want it kept", obj.GetNamespace(), obj.GetName(), got, err)
		}
	}
}

// policyObject returns p's Policy as named, in ns, with only the given labels.
func policyObject(t *testing.T, p fleet.Policy, ns, name string, l map[string]string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind, "spec": p.Body["spec"]}}
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetLabels(l)
	return obj
}

// create makes obj on the hub as an administrator.
func create(t *testing.T, admin dynamic.Interface, obj *unstructured.Unstructured) {
	t.Helper()
	gvr := map[string]schema.GroupVersionResource{"Policy": policyGVR, "Placement": placementGVR, "PlacementBinding": placementBindingGVR, "Namespace": namespaceGVR}[obj.GetKind()]
	var err error
	if obj.GetNamespace() == "" {
		_, err = admin.Resource(gvr).Create(t.Context(), obj, metav1.CreateOptions{})
	} else {
		_, err = admin.Resource(gvr).Namespace(obj.GetNamespace()).Create(t.Context(), obj, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("create %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

func TestApplySetReportsInvalidPolicyAndAppliesTheOthers(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	a, admin, cfg := newPolicyTest(t)

	bad, good := testPolicy("bad-placement", "inform"), testPolicy("good", "inform")
	g.Expect(applyAll(ctx, a, policySet(nil, desiredPolicy(t, bad, a.hubID, cfg)))).To(gomega.Succeed())

	// The bad policy comes first: the good one is applied all the same, and
	// the pass itself succeeds, with the bad policy's failure alone.
	broken := desiredPolicy(t, bad, a.hubID, cfg)
	g.Expect(kindOf(t, broken.Objects[3])).To(gomega.Equal("Placement"))
	broken.Objects[3] = editObject(t, broken.Objects[3], func(o map[string]any) { o["spec"].(map[string]any)["numberOfClusters"] = "three" })
	failures, err := a.applySet(ctx, policySet(nil, broken, desiredPolicy(t, good, a.hubID, cfg)))
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the pass")
	g.Expect(failures).To(gomega.HaveLen(1), "one failed entry")
	g.Expect(failures[0].RegistrationId).To(gomega.BeNil())
	g.Expect(*failures[0].PolicyId).To(gomega.Equal(bad.ID))
	name := fleet.HubPolicyName(bad, cfg.Namespace)
	for _, s := range []string{"Placement", name} {
		g.Expect(failures[0].Message).To(gomega.ContainSubstring(s))
	}
	expectPolicyObjects(t, admin, good, a.hubID, cfg)
	// What the bad policy had applied before is not removed as stale.
	placement, getErr := get(ctx, admin, placementGVR, cfg.Namespace, name)
	if getErr != nil {
		t.Fatalf("Placement %s/%s applied by the earlier pass: %v, want it kept", cfg.Namespace, name, getErr)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(placement.Object, "spec", "numberOfClusters"); found {
		t.Errorf("Placement %s/%s spec = %v, want the rejected numberOfClusters not stored", cfg.Namespace, name, placement.Object["spec"])
	}
}

func TestPolicyOwnedSelector(t *testing.T) {
	t.Parallel()
	sel, err := labels.Parse(policyOwnedSelector("hub-a"))
	if err != nil {
		t.Fatalf("labels.Parse(policyOwnedSelector) = %v", err)
	}
	own := labels.Set{fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelHubID: "hub-a", fleet.LabelPolicyID: "p1"}
	with := func(k, v string) labels.Set {
		s := maps.Clone(own)
		if v == "" {
			delete(s, k)
		} else {
			s[k] = v
		}
		return s
	}
	tests := []struct {
		name string
		set  labels.Set
		want bool
	}{
		{"the agent's policy object", own, true},
		{"another hub's", with(fleet.LabelHubID, "hub-b"), false},
		{"no policy id: the shared namespace and binding", with(fleet.LabelPolicyID, ""), false},
		{"not managed by the agent", with(fleet.LabelManagedBy, "someone"), false},
		{"replicated by the policy framework", with(fleet.LabelRootPolicy, "ns.p1"), false},
	}
	for _, tt := range tests {
		if got := sel.Matches(tt.set); got != tt.want {
			t.Errorf("policyOwnedSelector(hub-a) matches %s (%v) = %v, want %v", tt.name, tt.set, got, tt.want)
		}
	}
}

// TestPassConditionNamesAKindTheHubDoesNotServe applies, on the real hub, a
// set whose policy has a kind the hub has no CRD for (an unserved version of
// Policy, as on a hub without the policy framework) beside a good policy:
// that policy alone fails, KindNotServed; the DesiredSetApplied condition the
// heartbeat would carry is False, EntriesFailed, naming it; then True once a
// pass applies everything, and ApplyFailed for a pass that failed as a whole.
func TestPassConditionNamesAKindTheHubDoesNotServe(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	a, admin, cfg := newPolicyTest(t)
	unserved, good := testPolicy("unserved", "inform"), testPolicy("served", "inform")
	missing := desiredPolicy(t, unserved, a.hubID, cfg)
	for i, o := range missing.Objects {
		if kindOf(t, o) == "Policy" {
			missing.Objects[i] = editObject(t, o, func(o map[string]any) { o["apiVersion"] = "policy.open-cluster-management.io/v9" })
		}
	}
	failures, err := a.applySet(ctx, policySet(nil, missing, desiredPolicy(t, good, a.hubID, cfg)))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(failures).To(gomega.HaveLen(1))
	g.Expect([]string{*failures[0].PolicyId, failures[0].Reason}).To(gomega.Equal([]string{unserved.ID, ReasonKindNotServed}))
	g.Expect(failures[0].Message).To(gomega.ContainSubstring("Policy"))
	expectPolicyObjects(t, admin, good, a.hubID, cfg)

	var pass passRecord
	first := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	g.Expect(pass.record(7, nil, failures, first)).To(gomega.BeTrue(), "the first pass sets the condition")
	c, ok := pass.condition()
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(c.Type).To(gomega.Equal(ConditionDesiredSetApplied))
	g.Expect(c.Status).To(gomega.Equal(private.False))
	g.Expect(c.Reason).To(gomega.Equal(ReasonEntriesFailed))
	g.Expect(*c.Message).To(gomega.ContainSubstring("applied revision 7 but for 1 entries"))
	g.Expect(*c.Message).To(gomega.ContainSubstring("policy " + unserved.ID + " (KindNotServed)"))
	acked, ok := pass.acknowledgedFailures(7)
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(acked).To(gomega.Equal(failures), "the failures of the acknowledged revision go with the heartbeat")
	g.Expect(pass.record(8, nil, failures, first.Add(time.Minute))).To(gomega.BeFalse(), "still failing: no transition")
	c, _ = pass.condition()
	g.Expect(c.LastTransitionTime).To(gomega.Equal(first))

	g.Expect(applyAll(ctx, a, policySet(nil, desiredPolicy(t, good, a.hubID, cfg)))).To(gomega.Succeed())
	g.Expect(pass.record(9, nil, nil, first.Add(2*time.Minute))).To(gomega.BeTrue())
	c, _ = pass.condition()
	g.Expect([]any{c.Status, c.Reason, *c.Message, c.LastTransitionTime}).To(gomega.Equal(
		[]any{private.True, ReasonApplied, "applied revision 9", first.Add(2 * time.Minute)}))

	g.Expect(pass.record(10, errors.New("the hub is unreachable"), nil, first.Add(3*time.Minute))).To(gomega.BeTrue())
	c, _ = pass.condition()
	g.Expect([]any{c.Status, c.Reason, *c.Message}).To(gomega.Equal([]any{private.False, ReasonApplyFailed, "revision 10: the hub is unreachable"}))
	_, ok = pass.acknowledgedFailures(10)
	g.Expect(ok).To(gomega.BeFalse(), "a failed pass acknowledges nothing")
	acked, ok = pass.acknowledgedFailures(9)
	g.Expect([]any{acked, ok}).To(gomega.Equal([]any{[]private.EntryFailure{}, true}), "revision 9 stays acknowledged, with no failure")
}
