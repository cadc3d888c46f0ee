package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/google/uuid"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/governancetest"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

var (
	managedClusters = hubkind.ManagedCluster.GVR()
	namespaces      = hubkind.Namespace.GVR()
	secretsGVR      = hubkind.Secret.GVR()
	addonConfigs    = hubkind.KlusterletAddonConfig.GVR()
)

// openShiftVersion is the OpenShift version the joined clusters claim
// (the version.openshift.io ClusterClaim RHACM's add-on makes on an
// OpenShift cluster); the inventory reports it.
const openShiftVersion = "4.17.3"

// The one node of a cluster joined on a control plane of its own: the
// registration agent reports its resources as the cluster's capacity.
var (
	nodeCapacity    = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("24"), corev1.ResourceMemory: resource.MustParse("96Gi")}
	nodeAllocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("22"), corev1.ResourceMemory: resource.MustParse("90Gi")}
)

// startHub returns the hub every end-to-end test shares, with the upstream
// engines Fleet Manager drives running against it: OCM's registration,
// placement and work controllers (internal/hub/ocmtest) and the governance
// policy propagator (internal/hub/governancetest), started on the first call.
// They manage every ManagedCluster, Placement and Policy of the hub: no
// test plays them.
func startHub(t *testing.T) *governancetest.Hub {
	t.Helper()
	gov := governancetest.Start(t)
	if err := gov.OCM().SetClaim("version.openshift.io", openShiftVersion); err != nil {
		t.Fatalf("the joined clusters' version claim: %v", err)
	}
	return gov
}

// testHub returns the shared hub as hubtest's type, for what needs no engine.
func testHub(t *testing.T) *hubtest.Hub {
	t.Helper()
	return startHub(t).Hub()
}

// importController is a stand-in for RHACM's managedcluster-import-controller,
// which no served module publishes
// (github.com/stolostron/managedcluster-import-controller): for each
// ManagedCluster of one hub id that the hub accepts and whose auto-import
// secret exists, it writes the <name>-import secret (the klusterlet's CRDs
// and manifests, as the import controller renders them; here placeholders
// of the same keys) and deploys the klusterlet on the cluster the secret
// names, where OCM's real registration agent joins the hub under the
// ManagedCluster's name; from there the ManagedCluster's acceptance,
// finalizers, conditions, lease and claims are OCM's. The cluster is
// ocmtest's shared managed cluster (JoinShared), or with ownClusters a
// control plane of its own (JoinOwn) with OpenShift's id.openshift.io and
// version.openshift.io claims and a node, for tests that tell clusters
// apart by their id or read their capacity. When the ManagedCluster is being deleted it removes the klusterlet,
// as the import controller does before it lets the cluster go. A capacity
// pool's clusters are left to provisiontest, which plays their install and
// import.
type importController struct {
	t           *testing.T
	ocm         *ocmtest.Hub
	dyn         dynamic.Interface
	hubID       string
	ownClusters bool

	mu      sync.Mutex
	joined  map[string]*ocmtest.Cluster
	joining map[string]bool
	wg      sync.WaitGroup
}

// playImportController runs the stand-in for the hub id until the test
// ends; the cleanup removes the klusterlets it deployed.
func playImportController(t *testing.T, gov *governancetest.Hub, hubID string) *importController {
	t.Helper()
	return startImportController(t, gov, hubID, false)
}

// playImportControllerOwnClusters is playImportController with a control
// plane and an id.openshift.io claim of its own for each cluster.
func playImportControllerOwnClusters(t *testing.T, gov *governancetest.Hub, hubID string) *importController {
	t.Helper()
	return startImportController(t, gov, hubID, true)
}

func startImportController(t *testing.T, gov *governancetest.Hub, hubID string, ownClusters bool) *importController {
	t.Helper()
	ic := &importController{t: t, ocm: gov.OCM(), dyn: hubtest.Dynamic(t), hubID: hubID, ownClusters: ownClusters,
		joined: map[string]*ocmtest.Cluster{}, joining: map[string]bool{}}
	// Cleanups run last first: the passes stop, then the joins in flight
	// end, then the klusterlets go.
	t.Cleanup(ic.leaveAll)
	t.Cleanup(ic.wg.Wait)
	t.Cleanup(func() {
		if t.Failed() {
			ic.logState()
		}
	})
	playEvery(t, 200*time.Millisecond, ic.pass)
	kube := hubtest.Start(t).NewClientsetFor(t)
	playEvery(t, 500*time.Millisecond, func(ctx context.Context) { finalizeNamespaces(ctx, t, kube, ic.dyn, hubID) })
	return ic
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

func (ic *importController) pass(ctx context.Context) {
	list, err := ic.dyn.Resource(managedClusters).List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelHubID + "=" + ic.hubID})
	if err != nil {
		return
	}
	// A ManagedCluster gone before a pass saw its deletion.
	present := map[string]bool{}
	for _, mc := range list.Items {
		present[mc.GetName()] = true
	}
	ic.mu.Lock()
	var gone []string
	for name := range ic.joined {
		if !present[name] {
			gone = append(gone, name)
		}
	}
	ic.mu.Unlock()
	for _, name := range gone {
		ic.leave(name)
	}
	for i := range list.Items {
		mc := &list.Items[i]
		name := mc.GetName()
		switch {
		case mc.GetLabels()[fleet.LabelPoolID] != "":
		case mc.GetDeletionTimestamp() != nil:
			ic.leave(name)
		case ic.known(name):
		default:
			if accepts, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); !accepts {
				continue
			}
			if err := writeImportSecret(ctx, ic.dyn, name); err != nil {
				continue
			}
			// Without an auto-import secret (a registration without
			// credentials), the import waits for the cluster's owner to
			// apply the import material (importManually).
			if _, err := ic.dyn.Resource(secretsGVR).Namespace(name).Get(ctx, fleet.AutoImportSecretName, metav1.GetOptions{}); err != nil {
				continue
			}
			ic.startJoin(name)
		}
	}
}

// importManually plays a cluster's owner applying the import material
// (the <name>-import secret's manifests, as `fleetctl clusters import`
// prints them) on the cluster, RHACM's manual import: the klusterlet joins.
func (ic *importController) importManually(name string) {
	if !ic.known(name) {
		ic.startJoin(name)
	}
}

func (ic *importController) startJoin(name string) {
	ic.mu.Lock()
	ic.joining[name] = true
	ic.mu.Unlock()
	ic.wg.Add(1)
	go ic.join(name)
}

// join deploys the klusterlet of name; a failure is logged, and the next
// pass tries again.
func (ic *importController) join(name string) {
	defer ic.wg.Done()
	var cluster *ocmtest.Cluster
	var err error
	if ic.ownClusters {
		if cluster, err = ic.ocm.JoinOwn(name); err == nil {
			err = errors.Join(cluster.SetClaim(fleet.ClaimID, uuid.NewString()), cluster.SetClaim("version.openshift.io", openShiftVersion),
				cluster.AddNode("worker-0", nodeCapacity, nodeAllocatable))
		}
	} else {
		cluster, err = ic.ocm.JoinShared(name)
	}
	if err != nil && cluster != nil {
		cluster.Leave()
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	delete(ic.joining, name)
	if err != nil {
		ic.t.Logf("import controller: %v", err)
		return
	}
	ic.joined[name] = cluster
}

// logState logs each ManagedCluster of the hub id with its conditions and
// the end of its klusterlet's log, for a failed test.
func (ic *importController) logState() {
	list, err := ic.dyn.Resource(managedClusters).List(context.Background(), metav1.ListOptions{LabelSelector: fleet.LabelHubID + "=" + ic.hubID})
	if err != nil {
		ic.t.Logf("import controller: %v", err)
		return
	}
	for _, mc := range list.Items {
		conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		ic.mu.Lock()
		cluster, joining := ic.joined[mc.GetName()], ic.joining[mc.GetName()]
		ic.mu.Unlock()
		tails := "no klusterlet"
		switch {
		case cluster != nil:
			tails = cluster.LogTails(30)
		case joining:
			tails = "klusterlet joining"
		}
		ic.t.Logf("import controller: ManagedCluster %s (deleting: %v) conditions %v\n%s",
			mc.GetName(), mc.GetDeletionTimestamp() != nil, conds, tails)
	}
}

func (ic *importController) known(name string) bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.joined[name] != nil || ic.joining[name]
}

// leave removes the klusterlet of name, if the stand-in deployed one.
func (ic *importController) leave(name string) {
	ic.mu.Lock()
	cluster := ic.joined[name]
	delete(ic.joined, name)
	ic.mu.Unlock()
	if cluster != nil {
		cluster.Leave()
	}
}

func (ic *importController) leaveAll() {
	ic.mu.Lock()
	names := make([]string, 0, len(ic.joined))
	for name := range ic.joined {
		names = append(names, name)
	}
	ic.mu.Unlock()
	for _, name := range names {
		ic.leave(name)
	}
}

// writeImportSecret creates <name>-import in the cluster's namespace, as the
// import controller does, unless it is there.
func writeImportSecret(ctx context.Context, dyn dynamic.Interface, name string) error {
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name + "-import", "namespace": name},
		"stringData": map[string]any{
			"crds.yaml":   "kind: CustomResourceDefinition # import crds of " + name,
			"import.yaml": "kind: Namespace # import manifests of " + name,
		},
	}}
	_, err := dyn.Resource(secretsGVR).Namespace(name).Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// finalizeNamespaces plays, for the namespaces labelled with one hub id,
// kube-controller-manager's namespace controller, which the test hub does
// not run (it serves etcd and kube-apiserver alone): a namespace being
// deleted has its content deleted, every namespaced resource the hub
// serves, and then its "kubernetes" finalizer removed through the
// namespace's finalize subresource, as
// k8s.io/kubernetes/pkg/controller/namespace/deletion does. Without it a
// deregistered cluster's namespace stays Terminating, and the same
// cluster registered again (a restored database's) could never be
// delivered into it. It is done for one namespace at a time, and what
// fails is retried on the next pass.
func finalizeNamespaces(ctx context.Context, t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, hubID string) {
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelHubID + "=" + hubID})
	if err != nil {
		return
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			continue
		}
		if err := deleteNamespaceContent(ctx, kube, dyn, ns.Name); err != nil {
			continue
		}
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		if _, err := kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Logf("namespace controller: finalize %s: %v", ns.Name, err)
		}
	}
}

// deleteNamespaceContent deletes every object of every namespaced resource
// the hub serves in namespace, and fails while any is left (one with a
// finalizer of its own waits for its controller).
func deleteNamespaceContent(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, namespace string) error {
	_, lists, err := kube.Discovery().ServerGroupsAndResources()
	if err != nil {
		return err
	}
	left := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !r.Namespaced || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name)).Namespace(namespace)
			items, err := res.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, item := range items.Items {
				left++
				if item.GetDeletionTimestamp() == nil {
					_ = res.Delete(ctx, item.GetName(), metav1.DeleteOptions{})
				}
			}
		}
	}
	if left > 0 {
		return fmt.Errorf("%d objects left in namespace %s", left, namespace)
	}
	return nil
}
