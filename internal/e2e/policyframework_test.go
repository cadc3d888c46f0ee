package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

var (
	policiesGVR          = hubkind.Policy.GVR()
	placementsGVR        = hubkind.Placement.GVR()
	placementBindingsGVR = hubkind.PlacementBinding.GVR()
	placementDecisionGVR = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Resource: "placementdecisions"}
)

// policyFramework plays, for the root policies one hub's agent applied in
// namespace, what RHACM's placement controller and policy framework do on
// a real hub: it evaluates each Placement's label selector over the
// ManagedClusters, writes the PlacementDecision, and writes the root
// Policy's status with each selected cluster's compliance, as the status
// sync of the clusters' policy controllers would report it. The compliance
// of a cluster is what the test set with setCompliance (Pending until then).
// It does not create replicated policies or evaluate policy templates.
type policyFramework struct {
	mu         sync.Mutex
	compliance map[string]string
}

// playPolicyFramework polls until the test ends.
func playPolicyFramework(t *testing.T, dyn dynamic.Interface, namespace, hubID string) *policyFramework {
	t.Helper()
	pf := &policyFramework{compliance: map[string]string{}}
	playEvery(t, 200*time.Millisecond, func(ctx context.Context) { pf.pass(ctx, t, dyn, namespace, hubID) })
	return pf
}

// setCompliance sets what the framework reports for cluster from now on.
func (pf *policyFramework) setCompliance(cluster, state string) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	pf.compliance[cluster] = state
}

func (pf *policyFramework) state(cluster string) string {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	return pf.compliance[cluster]
}

func (pf *policyFramework) pass(ctx context.Context, t *testing.T, dyn dynamic.Interface, namespace, hubID string) {
	sel := metav1.ListOptions{LabelSelector: fleet.LabelHubID + "=" + hubID}
	policies, err := dyn.Resource(policiesGVR).Namespace(namespace).List(ctx, sel)
	if err != nil {
		return
	}
	for i := range policies.Items {
		policy := &policies.Items[i]
		clusters, err := placedClusters(ctx, dyn, namespace, policy.GetName())
		if err != nil {
			continue
		}
		writeDecision(ctx, t, dyn, namespace, policy.GetName(), clusters)
		statuses, overall := []any{}, "Compliant"
		for _, c := range clusters {
			entry := map[string]any{"clustername": c, "clusternamespace": c}
			switch s := pf.state(c); s {
			case "":
				overall = "Pending"
			default:
				entry["compliant"] = s
				if s == "NonCompliant" {
					overall = s
				}
			}
			statuses = append(statuses, entry)
		}
		status := map[string]any{"compliant": overall, "status": statuses,
			"placement": []any{map[string]any{"placement": policy.GetName(), "placementBinding": policy.GetName()}}}
		if old, _, _ := unstructured.NestedMap(policy.Object, "status"); equalJSON(old, status) {
			continue
		}
		policy.Object["status"] = status
		if _, err := dyn.Resource(policiesGVR).Namespace(namespace).UpdateStatus(ctx, policy, metav1.UpdateOptions{}); err != nil && !errors.IsConflict(err) {
			t.Logf("policy framework: status of %s: %v", policy.GetName(), err)
		}
	}
}

// placedClusters evaluates the Placement name, bound to its policy by a
// PlacementBinding of the same name, over the hub's ManagedClusters.
func placedClusters(ctx context.Context, dyn dynamic.Interface, namespace, name string) ([]string, error) {
	if _, err := dyn.Resource(placementBindingsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return nil, err
	}
	placement, err := dyn.Resource(placementsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	predicates, _, _ := unstructured.NestedSlice(placement.Object, "spec", "predicates")
	var ls metav1.LabelSelector
	if len(predicates) > 0 {
		raw, _, _ := unstructured.NestedMap(predicates[0].(map[string]any), "requiredClusterSelector", "labelSelector")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
			return nil, err
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, err
	}
	list, err := dyn.Resource(managedClusters).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, mc := range list.Items {
		if mc.GetDeletionTimestamp() == nil {
			names = append(names, mc.GetName())
		}
	}
	return names, nil
}

// writeDecision records the placement's decision, as the placement controller does.
func writeDecision(ctx context.Context, t *testing.T, dyn dynamic.Interface, namespace, placement string, clusters []string) {
	res := dyn.Resource(placementDecisionGVR).Namespace(namespace)
	name := placement + "-decision-1"
	decision, err := res.Get(ctx, name, metav1.GetOptions{})
	if errors.IsNotFound(err) {
		decision = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
			"metadata": map[string]any{"name": name, "namespace": namespace,
				"labels": map[string]any{"cluster.open-cluster-management.io/placement": placement}},
		}}
		if decision, err = res.Create(ctx, decision, metav1.CreateOptions{}); err != nil {
			t.Logf("policy framework: create %s: %v", name, err)
			return
		}
	} else if err != nil {
		return
	}
	decisions := []any{}
	for _, c := range clusters {
		decisions = append(decisions, map[string]any{"clusterName": c, "reason": ""})
	}
	if old, _, _ := unstructured.NestedSlice(decision.Object, "status", "decisions"); equalJSON(old, decisions) {
		return
	}
	decision.Object["status"] = map[string]any{"decisions": decisions}
	if _, err := res.UpdateStatus(ctx, decision, metav1.UpdateOptions{}); err != nil && !errors.IsConflict(err) {
		t.Logf("policy framework: decision %s: %v", name, err)
	}
}

// equalJSON compares two decoded JSON values by their encoding (map keys
// are sorted, so equal values encode alike).
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
