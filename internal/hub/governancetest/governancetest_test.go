package governancetest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/governancetest"
	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

func TestMain(m *testing.M) { governancetest.Main(m) }

// waitTimeout bounds each wait on the upstream programs: a managed cluster
// joins in a few of its agents' periods, and the placement controller and
// the propagator act within their own resyncs on a busy machine.
const waitTimeout = 3 * time.Minute

// TestRealPropagatorPlacesTenantPolicy puts a tenant's policy on the hub as
// Fleet Manager renders it (fleet.PolicyHubObjects, applied server-side as
// the agent applies it) and follows it through OCM's real placement
// controller and the real governance-policy-propagator: the
// PlacementDecision, the replicated policy in the selected cluster's
// namespace only (not in an unjoined cluster's, nor in another
// organisation's on the shared hub), a spec change reaching the replica, the
// replicas' compliance aggregated into the root policy's status, a second
// cluster joining the placement, dropped from it by a NoSelect taint and
// back, the first leaving it, and the replicas removed with the root policy.
// Only the replicas' status is written by the test, as the framework addon's
// status-sync would write it (governancetest's package comment says why).
func TestRealPropagatorPlacesTenantPolicy(t *testing.T) {
	gov := governancetest.Start(t)
	hub := gov.Hub()
	dyn := hub.NewDynamicFor(t)
	ctx := t.Context()
	suffix := randomSuffix(t)
	const org = "org-gov"

	// Clusters on a shared hub, labelled as Fleet Manager labels a
	// registration's ManagedCluster: the organisation's cluster in the
	// policy's selector (env=prod), one out of it, one in it whose agent
	// never joins, and another organisation's cluster labelled env=prod.
	prod, dev, unjoined, foreign := "gov-prod-"+suffix, "gov-dev-"+suffix, "gov-unjoined-"+suffix, "gov-other-"+suffix
	for _, c := range []struct{ name, env, org string }{{prod, "prod", org}, {dev, "dev", org}, {unjoined, "prod", org}, {foreign, "prod", "org-other"}} {
		createManagedCluster(t, dyn, c.name, map[string]string{"env": c.env, fleet.LabelOrgID: c.org})
	}
	clusters := map[string]*ocmtest.Cluster{}
	for _, name := range []string{prod, dev, foreign} {
		clusters[name] = gov.OCM().Join(t, name)
	}
	waitFor := func(t *testing.T, what string, check func() error) {
		t.Helper()
		deadline := time.Now().Add(waitTimeout)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			err := check()
			if err == nil {
				return
			}
			exited := gov.Err()
			for _, c := range clusters {
				if exited == nil {
					exited = c.Err()
				}
			}
			if exited != nil {
				t.Fatalf("waiting for %s: %v", what, exited)
			}
			if time.Now().After(deadline) {
				t.Fatalf("waited %s for %s: %v\n--- end of the propagator's log:\n%s", waitTimeout, what, err, gov.LogTail(40))
			}
			<-tick.C
		}
	}

	// The registration controller taints a cluster whose agent has not
	// reported it available as unreachable, and the placement controller
	// selects no cluster with a NoSelect taint that the Placement does not
	// tolerate: Fleet Manager's Placements tolerate none. Waiting for each
	// cluster's final taints first makes the decisions below the only ones.
	waitFor(t, "the joined clusters available and untainted, the other unreachable", func() error {
		for name, want := range map[string]string{prod: "", dev: "", foreign: "", unjoined: "cluster.open-cluster-management.io/unreachable"} {
			got, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var mc struct {
				Spec struct {
					Taints []struct {
						Key string `json:"key"`
					} `json:"taints"`
				} `json:"spec"`
				Status struct {
					Conditions []metav1.Condition `json:"conditions"`
				} `json:"status"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &mc); err != nil {
				return err
			}
			var taints string
			for _, taint := range mc.Spec.Taints {
				taints += taint.Key
			}
			if taints != want {
				return fmt.Errorf("cluster %s taints %q, want %q", name, taints, want)
			}
			if want == "" && !meta.IsStatusConditionTrue(mc.Status.Conditions, "ManagedClusterConditionAvailable") {
				return fmt.Errorf("cluster %s not available: %+v", name, mc.Status.Conditions)
			}
		}
		return nil
	})

	cfg := fleet.PolicyHubConfig{Namespace: "gov-policies-" + suffix, ClusterSet: "global"}
	policy := tenantPolicy(suffix, org, "inform")
	hubID := "hub-" + suffix
	name := fleet.HubPolicyName(policy, cfg.Namespace)
	replica := governancetest.ReplicatedName(cfg.Namespace, name)
	rendered := fleet.PolicyHubObjects(policy, hubID, false, cfg)
	apply(t, dyn, rendered.Objects)

	t.Run("PlacedAndReplicated", func(t *testing.T) {
		waitFor(t, "the placement controller's decision for the prod cluster alone", func() error {
			return decisionIs(ctx, dyn, cfg.Namespace, name, prod)
		})
		var got *unstructured.Unstructured
		waitFor(t, "the replicated policy in the prod cluster's namespace", func() error {
			var err error
			got, err = dyn.Resource(hubkind.Policy.GVR()).Namespace(prod).Get(ctx, replica, metav1.GetOptions{})
			return err
		})
		root := getPolicy(t, dyn, cfg.Namespace, name)
		if !reflect.DeepEqual(got.Object["spec"], root.Object["spec"]) {
			t.Errorf("replica spec %v, want the root policy's %v", got.Object["spec"], root.Object["spec"])
		}
		labels := got.GetLabels()
		for k, v := range map[string]string{
			"policy.open-cluster-management.io/root-policy":       replica,
			"policy.open-cluster-management.io/cluster-name":      prod,
			"policy.open-cluster-management.io/cluster-namespace": prod,
			// The root's labels are copied: the agent's clean-up finds the
			// replicas by Fleet Manager's labels and must leave them alone
			// by the root-policy label (docs/policies.md).
			fleet.LabelPolicyID: policy.ID, fleet.LabelHubID: hubID, fleet.LabelManagedBy: fleet.ManagedByAgent,
		} {
			if labels[k] != v {
				t.Errorf("replica label %s = %q, want %q (labels %v)", k, labels[k], v, labels)
			}
		}
		waitFor(t, "the root policy's status listing the prod cluster, not yet evaluated", func() error {
			return statusIs(ctx, dyn, cfg.Namespace, name, "", map[string]string{prod: ""})
		})
		for _, other := range []string{dev, unjoined, foreign} {
			if _, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(other).Get(ctx, replica, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("replica in the namespace of %s, which the placement did not select: %v", other, err)
			}
		}
		root = getPolicy(t, dyn, cfg.Namespace, name)
		placements, _, _ := unstructured.NestedSlice(root.Object, "status", "placement")
		want := []any{map[string]any{"placement": name, "placementBinding": name}}
		if !reflect.DeepEqual(placements, want) {
			t.Errorf("root status.placement %v, want %v", placements, want)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("SpecChangeReachesReplica", func(t *testing.T) {
		changed := tenantPolicy(suffix, org, "enforce")
		changed.ID = policy.ID
		apply(t, dyn, fleet.PolicyHubObjects(changed, hubID, false, cfg).Objects)
		waitFor(t, "the replica's remediationAction enforce", func() error {
			got, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(prod).Get(ctx, replica, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if action, _, _ := unstructured.NestedString(got.Object, "spec", "remediationAction"); action != "enforce" {
				return fmt.Errorf("remediationAction %q", action)
			}
			return nil
		})
	})

	t.Run("ComplianceAggregated", func(t *testing.T) {
		for _, state := range []string{"NonCompliant", "Compliant"} {
			if err := governancetest.SetReplicatedCompliance(ctx, dyn, prod, cfg.Namespace, name, state, "set by the test"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the root policy "+state, func() error {
				return statusIs(ctx, dyn, cfg.Namespace, name, state, map[string]string{prod: state})
			})
		}
	})

	t.Run("SecondClusterJoinsPlacement", func(t *testing.T) {
		relabel(t, dyn, dev, "prod")
		waitFor(t, "the replicated policy in the second cluster's namespace", func() error {
			_, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(dev).Get(ctx, replica, metav1.GetOptions{})
			return err
		})
		// One cluster not evaluated yet: the root's compliance is unknown
		// (no status.compliant), not Compliant.
		waitFor(t, "the root policy listing both clusters", func() error {
			return statusIs(ctx, dyn, cfg.Namespace, name, "", map[string]string{prod: "Compliant", dev: ""})
		})
		if err := governancetest.SetReplicatedCompliance(ctx, dyn, dev, cfg.Namespace, name, "NonCompliant", "set by the test"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the root policy NonCompliant through the second cluster", func() error {
			return statusIs(ctx, dyn, cfg.Namespace, name, "NonCompliant", map[string]string{prod: "Compliant", dev: "NonCompliant"})
		})
	})

	t.Run("NoSelectTaintDropsCluster", func(t *testing.T) {
		// A NoSelect taint is what the registration controller puts on a
		// cluster whose agent stops reporting (unreachable, unavailable);
		// this one is the test's own, so the registration controller leaves
		// it alone while the cluster stays available.
		taint := fmt.Appendf(nil, `{"spec":{"taints":[{"key":"governancetest/cordoned","effect":"NoSelect","timeAdded":%q}]}}`,
			time.Now().UTC().Format(time.RFC3339))
		if _, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Patch(ctx, dev, types.MergePatchType, taint, metav1.PatchOptions{}); err != nil {
			t.Fatalf("taint %s: %v", dev, err)
		}
		waitFor(t, "the decision without the tainted cluster", func() error {
			return decisionIs(ctx, dyn, cfg.Namespace, name, prod)
		})
		waitFor(t, "the tainted cluster's replica removed", func() error {
			_, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(dev).Get(ctx, replica, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("replica still there (%v)", err)
		})
		// Its NonCompliant goes with it: the root reads Compliant.
		waitFor(t, "the root policy without the tainted cluster", func() error {
			return statusIs(ctx, dyn, cfg.Namespace, name, "Compliant", map[string]string{prod: "Compliant"})
		})
		if _, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Patch(ctx, dev, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("untaint %s: %v", dev, err)
		}
		// Back in the decision, it has a new replica with no status yet.
		waitFor(t, "the untainted cluster listed again, without a state", func() error {
			return statusIs(ctx, dyn, cfg.Namespace, name, "", map[string]string{prod: "Compliant", dev: ""})
		})
	})

	t.Run("ClusterLeavesPlacement", func(t *testing.T) {
		relabel(t, dyn, prod, "dev")
		waitFor(t, "the decision without the first cluster", func() error {
			return decisionIs(ctx, dyn, cfg.Namespace, name, dev)
		})
		waitFor(t, "the first cluster's replica removed", func() error {
			_, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(prod).Get(ctx, replica, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("replica still there (%v)", err)
		})
		waitFor(t, "the root policy listing the second cluster alone", func() error {
			return statusIs(ctx, dyn, cfg.Namespace, name, "", map[string]string{dev: ""})
		})
	})

	t.Run("DeletedPolicyReplicasGo", func(t *testing.T) {
		// The agent deletes a policy's objects in this order when the
		// policy leaves the hub (docs/policies.md); the replicas are the
		// framework's to remove.
		for _, kind := range []hubkind.Kind{hubkind.PlacementBinding, hubkind.Placement, hubkind.Policy} {
			if err := dyn.Resource(kind.GVR()).Namespace(cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete %s: %v", kind.Kind, err)
			}
		}
		waitFor(t, "the second cluster's replica removed", func() error {
			_, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(dev).Get(ctx, replica, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("replica still there (%v)", err)
		})
	})
}

// tenantPolicy is an organisation's policy as the API stores it: the body
// of docs/policies.md's example, selecting the clusters labelled env=prod.
func tenantPolicy(suffix, org, remediation string) fleet.Policy {
	name := "audit-namespace"
	body := map[string]any{
		"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
		"metadata": map[string]any{
			"name":        name,
			"labels":      map[string]any{"team": "platform"},
			"annotations": map[string]any{"policy.open-cluster-management.io/standards": "NIST SP 800-53"},
		},
		"spec": map[string]any{
			"disabled": false, "remediationAction": remediation,
			"policy-templates": []any{map[string]any{"objectDefinition": map[string]any{
				"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{"remediationAction": "inform", "severity": "low", "object-templates": []any{
					map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
						"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "audit"},
					}},
				}},
			}}},
		},
	}
	return fleet.Policy{
		ID: "6f1c2b3a-0000-4000-8000-0000" + suffix, OrgID: org, Zone: "eu", Name: name, Body: body, Generation: 1,
		Selector: fleet.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}
}

// apply server-side applies the rendered objects in order, as the agent
// does (internal/agent/apply.go: its field manager, forced).
func apply(t *testing.T, dyn dynamic.Interface, objects []map[string]any) {
	t.Helper()
	force := true
	for _, o := range objects {
		obj := &unstructured.Unstructured{Object: o}
		kind, ok := kindOf(obj)
		if !ok {
			t.Fatalf("rendered a %s, which the test does not know", obj.GetKind())
		}
		body, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(kind.GVR())
		if kind.Namespaced {
			r = dyn.Resource(kind.GVR()).Namespace(obj.GetNamespace())
		}
		if _, err := r.Patch(t.Context(), obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "fleetshard-sync", Force: &force}); err != nil {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func kindOf(obj *unstructured.Unstructured) (hubkind.Kind, bool) {
	for _, k := range hubkind.All() {
		if k.Is(obj) {
			return k, true
		}
	}
	return hubkind.Kind{}, false
}

func createManagedCluster(t *testing.T, dyn dynamic.Interface, name string, labels map[string]string) {
	t.Helper()
	mc := hubkind.ManagedCluster.New("", name)
	mc.SetLabels(labels)
	// Accepted up front, as Fleet Manager's ManagedCluster asks.
	if err := unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Create(t.Context(), mc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ManagedCluster: %v", err)
	}
}

func relabel(t *testing.T, dyn dynamic.Interface, cluster, env string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"env":%q}}}`, env)
	if _, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Patch(t.Context(), cluster, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("relabel %s: %v", cluster, err)
	}
}

func getPolicy(t *testing.T, dyn dynamic.Interface, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	got, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Policy: %v", err)
	}
	return got
}

// decisionIs checks that the Placement's decisions list exactly clusters.
func decisionIs(ctx context.Context, dyn dynamic.Interface, namespace, placement string, clusters ...string) error {
	list, err := dyn.Resource(hubkind.PlacementDecision.GVR()).Namespace(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "cluster.open-cluster-management.io/placement=" + placement,
	})
	if err != nil {
		return err
	}
	var got []string
	for _, d := range list.Items {
		var pd struct {
			Status struct {
				Decisions []struct {
					ClusterName string `json:"clusterName"`
				} `json:"decisions"`
			} `json:"status"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &pd); err != nil {
			return err
		}
		for _, dec := range pd.Status.Decisions {
			got = append(got, dec.ClusterName)
		}
	}
	if !reflect.DeepEqual(got, clusters) {
		return fmt.Errorf("decisions %v, want %v", got, clusters)
	}
	return nil
}

// statusIs checks the root policy's status.compliant and, per cluster of
// status.status, its compliant ("" for none).
func statusIs(ctx context.Context, dyn dynamic.Interface, namespace, name, compliant string, perCluster map[string]string) error {
	got, err := dyn.Resource(hubkind.Policy.GVR()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var p struct {
		Status struct {
			Compliant string `json:"compliant"`
			Status    []struct {
				ClusterName      string `json:"clustername"`
				ClusterNamespace string `json:"clusternamespace"`
				Compliant        string `json:"compliant"`
			} `json:"status"`
		} `json:"status"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &p); err != nil {
		return err
	}
	clusters := map[string]string{}
	for _, s := range p.Status.Status {
		if s.ClusterNamespace != s.ClusterName {
			return fmt.Errorf("cluster %s listed in namespace %s", s.ClusterName, s.ClusterNamespace)
		}
		clusters[s.ClusterName] = s.Compliant
	}
	if p.Status.Compliant != compliant || !reflect.DeepEqual(clusters, perCluster) {
		return fmt.Errorf("status compliant %q per cluster %v, want %q and %v", p.Status.Compliant, clusters, compliant, perCluster)
	}
	return nil
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
