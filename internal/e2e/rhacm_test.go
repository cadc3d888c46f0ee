package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/provisiontest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

var (
	managedClusters = hubkind.ManagedCluster.GVR()
	namespaces      = hubkind.Namespace.GVR()
	secretsGVR      = hubkind.Secret.GVR()
	addonConfigs    = hubkind.KlusterletAddonConfig.GVR()
)

// rhacmFinalizer is what RHACM's registration controller puts on a
// ManagedCluster; deletion waits until it is gone.
const rhacmFinalizer = "cluster.open-cluster-management.io/api-resource-cleanup"

// playRHACM does, for the ManagedClusters of one hub id, what RHACM's
// controllers do on a real hub: it accepts each new cluster (finalizer, the
// HubAccepted/Joined/Available conditions and cluster claims in its status),
// writes the <name>-import secret, and on deletion removes the finalizer. A
// capacity pool's cluster is left to provisiontest, but for its deletion. It
// polls until the test ends.
func playRHACM(t *testing.T, dyn dynamic.Interface, hubID string) {
	t.Helper()
	playEvery(t, 100*time.Millisecond, func(ctx context.Context) { rhacmPass(ctx, t, dyn, hubID) })
}

// playEvery runs pass every interval, as a hub controller the test plays
// would, until the test ends; the cleanup waits for the pass in flight.
func playEvery(t *testing.T, interval time.Duration, pass func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				pass(ctx)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func rhacmPass(ctx context.Context, t *testing.T, dyn dynamic.Interface, hubID string) {
	list, err := dyn.Resource(managedClusters).List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelHubID + "=" + hubID})
	if err != nil {
		return
	}
	for i := range list.Items {
		mc := &list.Items[i]
		switch {
		case mc.GetDeletionTimestamp() != nil:
			if len(mc.GetFinalizers()) > 0 {
				mc.SetFinalizers(nil)
				_, _ = dyn.Resource(managedClusters).Update(ctx, mc, metav1.UpdateOptions{})
			}
		case mc.GetLabels()[fleet.LabelPoolID] != "":
			// A capacity pool's cluster joins once Hive installed it: provisiontest plays it.
		case len(mc.GetFinalizers()) == 0:
			mc.SetFinalizers([]string{rhacmFinalizer})
			if _, err := dyn.Resource(managedClusters).Update(ctx, mc, metav1.UpdateOptions{}); err != nil && !errors.IsConflict(err) {
				t.Logf("rhacm: finalizer on %s: %v", mc.GetName(), err)
			}
		case !clusterAvailable(mc):
			acceptCluster(ctx, t, dyn, mc)
		default:
			writeImportSecret(ctx, dyn, mc.GetName())
		}
	}
}

func clusterAvailable(mc *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == fleet.HubConditionAvailable && m["status"] == "True" {
			return true
		}
	}
	return false
}

// acceptCluster sets the status a hub gives a joined, available cluster.
func acceptCluster(ctx context.Context, t *testing.T, dyn dynamic.Interface, mc *unstructured.Unstructured) {
	status := provisiontest.JoinedStatus(mc.GetName(), "4.17.3", map[string]any{"cpu": "24", "memory": "96Gi", "core_worker": "16"},
		map[string]any{"cpu": "22", "memory": "90Gi"})
	if err := unstructured.SetNestedField(mc.Object, status, "status"); err != nil {
		t.Logf("rhacm: %v", err)
		return
	}
	if _, err := dyn.Resource(managedClusters).UpdateStatus(ctx, mc, metav1.UpdateOptions{}); err != nil && !errors.IsConflict(err) {
		t.Logf("rhacm: status of %s: %v", mc.GetName(), err)
	}
}

// writeImportSecret creates <name>-import in the cluster's namespace.
func writeImportSecret(ctx context.Context, dyn dynamic.Interface, name string) {
	if _, err := dyn.Resource(namespaces).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name + "-import", "namespace": name},
		"stringData": map[string]any{
			"crds.yaml":   "kind: CustomResourceDefinition # import crds of " + name,
			"import.yaml": "kind: Namespace # import manifests of " + name,
		},
	}}
	_, _ = dyn.Resource(secretsGVR).Namespace(name).Create(ctx, secret, metav1.CreateOptions{})
}
