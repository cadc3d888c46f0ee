// Package provisiontest plays, for tests on a hubtest hub, what Hive and
// RHACM's import do to a capacity pool's cluster, so that the fleet manager
// and its agent run against real objects on a real API server while no
// cloud is reached:
//
//   - Hive's clusterdeployment controller: a new ClusterDeployment gets
//     Hive's deprovision finalizer, then is installed (spec.installed, a
//     Provisioned condition, status.apiURL and webConsoleURL under its
//     baseDomain, powerState Running); a deleted one is deprovisioned after
//     Options.Deprovision (its finalizer removed, so the API server deletes
//     it), as a ClusterDeprovision would;
//   - Hive's machinepool controller: a MachinePool's status.replicas follows
//     its spec.replicas;
//   - RHACM's import of a Hive cluster: the ManagedCluster of an installed
//     ClusterDeployment (same name, in its namespace) is accepted, joined and
//     available, with cluster claims, and a capacity and allocatable that
//     follow its MachinePools' replicas (Options.CPUPerNode, MemoryPerNode);
//   - RHACM's work agent: a ManifestWork in a joined pool cluster's namespace
//     gets its Applied condition, False (reason AppliedManifestFailed) when
//     one of its manifests is of a kind named in Options.RefusedKinds, as a
//     cluster without that kind's CRD would refuse it, True otherwise.
//
// Only ManagedClusters labelled with a pool (fleet-manager.io/pool-id) are
// touched, so a test may play RHACM for the others itself. With
// Options.Import set, RHACM's import and work agent are the caller's: the
// ManagedClusters and ManifestWorks are left alone, and Import is called
// once for each installed ClusterDeployment, as RHACM's import controller
// deploys the klusterlet once Hive reports the cluster installed (a test
// with OCM's real controllers starts a klusterlet there).
//
// What it does not play: install failures and retries, ClusterProvisions and
// their pods, ClusterDeprovision objects, hibernation, DNS zones, the
// klusterlet's add-ons, the ManifestWorks' resource status, machine sets, and the
// cluster autoscaler. It polls the API server every Options.Interval; Hive
// and RHACM are woken by watches.
package provisiontest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// DeprovisionFinalizer is the finalizer Hive keeps on a ClusterDeployment
// until its cluster is deprovisioned.
const DeprovisionFinalizer = "hive.openshift.io/deprovision"

// rhacmFinalizer is the one RHACM's registration controller keeps on a
// ManagedCluster until it is detached.
const rhacmFinalizer = "cluster.open-cluster-management.io/api-resource-cleanup"

// Options are the stand-in's timing and sizes.
type Options struct {
	// Interval is how often it looks at the hub.
	Interval time.Duration
	// Install is how long after its creation a ClusterDeployment is installed.
	Install time.Duration
	// Deprovision is how long after its deletion a ClusterDeployment is gone.
	Deprovision time.Duration
	// CPUPerNode and MemoryGiPerNode size each worker node.
	CPUPerNode, MemoryGiPerNode int
	// RefusedKinds are the manifest kinds the clusters do not serve.
	RefusedKinds []string
	// Import, when set, replaces the played import and work agent: it is
	// called once per installed cluster, by Play, with the cluster's name
	// (its ClusterDeployment's and ManagedCluster's), and must not block
	// for long, as Play's pass waits on it.
	Import func(ctx context.Context, cluster string)
}

// DefaultOptions are quick enough for tests.
func DefaultOptions() Options {
	return Options{Interval: 100 * time.Millisecond, Install: 300 * time.Millisecond, Deprovision: 500 * time.Millisecond,
		CPUPerNode: 16, MemoryGiPerNode: 64}
}

// Play runs the stand-in against dyn until the test ends.
func Play(t *testing.T, dyn dynamic.Interface, opts Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if opts.Import != nil {
		imported, importer := map[string]bool{}, opts.Import
		opts.Import = func(ctx context.Context, cluster string) {
			if !imported[cluster] {
				imported[cluster] = true
				importer(ctx, cluster)
			}
		}
	}
	go func() {
		defer close(done)
		ticker := time.NewTicker(opts.Interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if err := Pass(ctx, dyn, opts, time.Now()); err != nil && ctx.Err() == nil {
					t.Logf("provisiontest: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

var (
	clusterDeployments = hubkind.ClusterDeployment.GVR()
	machinePools       = hubkind.MachinePool.GVR()
	managedClusters    = hubkind.ManagedCluster.GVR()
	manifestWorks      = hubkind.ManifestWork.GVR()
)

// Pass does one round of what it plays, at now. With opts.Import set, it
// calls Import for every installed cluster at each pass; Play calls it once.
func Pass(ctx context.Context, dyn dynamic.Interface, opts Options, now time.Time) error {
	cds, err := dyn.Resource(clusterDeployments).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ClusterDeployments: %w", err)
	}
	installed := map[string]bool{}
	for i := range cds.Items {
		cd := &cds.Items[i]
		done, err := reconcileDeployment(ctx, dyn, cd, opts, now)
		if err != nil {
			return err
		}
		if done {
			installed[cd.GetNamespace()+"/"+cd.GetName()] = true
			if opts.Import != nil && cd.GetNamespace() == cd.GetName() {
				opts.Import(ctx, cd.GetName())
			}
		}
	}
	pools, err := dyn.Resource(machinePools).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list MachinePools: %w", err)
	}
	nodes := map[string]int64{}
	for i := range pools.Items {
		mp := &pools.Items[i]
		want, _, _ := unstructured.NestedInt64(mp.Object, "spec", "replicas")
		nodes[mp.GetNamespace()] += want
		if have, found, _ := unstructured.NestedInt64(mp.Object, "status", "replicas"); !found || have != want {
			_ = unstructured.SetNestedField(mp.Object, want, "status", "replicas")
			if _, err := dyn.Resource(machinePools).Namespace(mp.GetNamespace()).UpdateStatus(ctx, mp, metav1.UpdateOptions{}); err != nil &&
				!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return fmt.Errorf("status of MachinePool %s: %w", mp.GetName(), err)
			}
		}
	}
	if opts.Import != nil {
		return nil
	}
	mcs, err := dyn.Resource(managedClusters).List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelPoolID})
	if err != nil {
		return fmt.Errorf("list ManagedClusters: %w", err)
	}
	for i := range mcs.Items {
		if err := importCluster(ctx, dyn, &mcs.Items[i], installed, nodes, opts); err != nil {
			return err
		}
		if joined(&mcs.Items[i]) {
			if err := applyWorks(ctx, dyn, mcs.Items[i].GetName(), opts, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyWorks plays the work agent on a joined cluster's ManifestWorks.
func applyWorks(ctx context.Context, dyn dynamic.Interface, cluster string, opts Options, now time.Time) error {
	res := dyn.Resource(manifestWorks).Namespace(cluster)
	works, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ManifestWorks of %s: %w", cluster, err)
	}
	for i := range works.Items {
		w := &works.Items[i]
		status, reason, message := "True", "AppliedManifestComplete", "Apply manifest complete"
		manifests, _, _ := unstructured.NestedSlice(w.Object, "spec", "workload", "manifests")
		for _, m := range manifests {
			if kind, _ := m.(map[string]any)["kind"].(string); slices.Contains(opts.RefusedKinds, kind) {
				status, reason = "False", "AppliedManifestFailed"
				message = fmt.Sprintf("Failed to apply manifest: the server could not find the requested resource (kind %s)", kind)
			}
		}
		conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
		if len(conds) == 1 && conds[0].(map[string]any)["status"] == status {
			continue
		}
		cond := map[string]any{"type": "Applied", "status": status, "reason": reason, "message": message,
			"lastTransitionTime": metav1.NewTime(now).UTC().Format(time.RFC3339)}
		_ = unstructured.SetNestedSlice(w.Object, []any{cond}, "status", "conditions")
		if _, err := res.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("status of ManifestWork %s/%s: %w", cluster, w.GetName(), err)
		}
	}
	return nil
}

// reconcileDeployment plays Hive on one ClusterDeployment and reports
// whether it is installed.
func reconcileDeployment(ctx context.Context, dyn dynamic.Interface, cd *unstructured.Unstructured, opts Options, now time.Time) (bool, error) {
	res := dyn.Resource(clusterDeployments).Namespace(cd.GetNamespace())
	if ts := cd.GetDeletionTimestamp(); ts != nil {
		if now.Sub(ts.Time) >= opts.Deprovision && slices.Contains(cd.GetFinalizers(), DeprovisionFinalizer) {
			cd.SetFinalizers(slices.DeleteFunc(cd.GetFinalizers(), func(f string) bool { return f == DeprovisionFinalizer }))
			if _, err := res.Update(ctx, cd, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("deprovision ClusterDeployment %s: %w", cd.GetName(), err)
			}
		}
		return false, nil
	}
	if !slices.Contains(cd.GetFinalizers(), DeprovisionFinalizer) {
		cd.SetFinalizers(append(cd.GetFinalizers(), DeprovisionFinalizer))
		_, err := res.Update(ctx, cd, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("finalizer on ClusterDeployment %s: %w", cd.GetName(), err)
		}
		return false, nil
	}
	if done, _, _ := unstructured.NestedBool(cd.Object, "spec", "installed"); done {
		return true, nil
	}
	if now.Sub(cd.GetCreationTimestamp().Time) < opts.Install {
		return false, nil
	}
	_ = unstructured.SetNestedField(cd.Object, true, "spec", "installed")
	updated, err := res.Update(ctx, cd, metav1.UpdateOptions{FieldManager: "hive"})
	if err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("install ClusterDeployment %s: %w", cd.GetName(), err)
	}
	domain, _, _ := unstructured.NestedString(updated.Object, "spec", "baseDomain")
	name, _, _ := unstructured.NestedString(updated.Object, "spec", "clusterName")
	at := metav1.NewTime(now).UTC().Format(time.RFC3339)
	status := map[string]any{
		"apiURL":        fmt.Sprintf("https://api.%s.%s:6443", name, domain),
		"webConsoleURL": fmt.Sprintf("https://console-openshift-console.apps.%s.%s", name, domain),
		"powerState":    "Running",
		"conditions": []any{map[string]any{"type": "Provisioned", "status": "True", "reason": "ProvisionSucceeded",
			"message": "Cluster is provisioned", "lastTransitionTime": at, "lastProbeTime": at}},
	}
	_ = unstructured.SetNestedField(updated.Object, status, "status")
	if _, err := res.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("status of ClusterDeployment %s: %w", cd.GetName(), err)
	}
	return true, nil
}

// importCluster plays RHACM on a pool cluster's ManagedCluster: joined and
// available once its ClusterDeployment is installed, sized by its
// MachinePools; its finalizer removed when it is deleted.
func importCluster(ctx context.Context, dyn dynamic.Interface, mc *unstructured.Unstructured, installed map[string]bool,
	nodes map[string]int64, opts Options) error {
	res := dyn.Resource(managedClusters)
	name := mc.GetName()
	switch {
	case mc.GetDeletionTimestamp() != nil:
		if len(mc.GetFinalizers()) > 0 {
			mc.SetFinalizers(nil)
			if _, err := res.Update(ctx, mc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return fmt.Errorf("detach ManagedCluster %s: %w", name, err)
			}
		}
		return nil
	case len(mc.GetFinalizers()) == 0:
		mc.SetFinalizers([]string{rhacmFinalizer})
		if _, err := res.Update(ctx, mc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("finalizer on ManagedCluster %s: %w", name, err)
		}
		return nil
	case !installed[name+"/"+name]:
		return nil
	}
	n := nodes[name]
	capacity := map[string]any{"cpu": fmt.Sprint(n * int64(opts.CPUPerNode)), "memory": fmt.Sprintf("%dGi", n*int64(opts.MemoryGiPerNode)),
		"core_worker": fmt.Sprint(n * int64(opts.CPUPerNode))}
	allocatable := map[string]any{"cpu": fmt.Sprint(n*int64(opts.CPUPerNode) - n), "memory": fmt.Sprintf("%dGi", n*int64(opts.MemoryGiPerNode-4))}
	if have, _, _ := unstructured.NestedMap(mc.Object, "status", "capacity"); fmt.Sprint(have) == fmt.Sprint(capacity) && joined(mc) {
		return nil
	}
	status := JoinedStatus(name, "4.16.3", capacity, allocatable)
	_ = unstructured.SetNestedField(mc.Object, status, "status")
	if _, err := res.UpdateStatus(ctx, mc, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("status of ManagedCluster %s: %w", name, err)
	}
	return nil
}

func joined(mc *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == fleet.HubConditionJoined && m["status"] == "True" {
			return true
		}
	}
	return false
}

// JoinedStatus is the status RHACM gives a joined, available cluster named
// name: the HubAccepted, Joined and Available conditions, its id, version
// and platform claims, capacity and allocatable.
func JoinedStatus(name, version string, capacity, allocatable map[string]any) map[string]any {
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(typ, reason string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": typ, "lastTransitionTime": now}
	}
	return map[string]any{
		"conditions": []any{
			cond(fleet.HubConditionAccepted, "HubClusterAdminAccepted"),
			cond(fleet.HubConditionJoined, "ManagedClusterJoined"),
			cond(fleet.HubConditionAvailable, "ManagedClusterAvailable"),
		},
		"clusterClaims": []any{
			map[string]any{"name": fleet.ClaimID, "value": "cid-" + name},
			map[string]any{"name": fleet.ClaimVersion, "value": version},
			map[string]any{"name": fleet.ClaimPlatform, "value": "AWS"},
		},
		"capacity": capacity, "allocatable": allocatable,
		"version": map[string]any{"kubernetes": "v1.31.4"},
	}
}
