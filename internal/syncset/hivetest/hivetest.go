// Package hivetest plays, for tests, the part of Hive that the syncset-hive
// delivery relies on: the clustersync controller, which applies the SyncSets
// of a ClusterDeployment to the cluster it deployed and records in a
// ClusterSync what each one applied. Here the Hive cluster and the target
// cluster are one API server (a hubtest hub).
//
//	hivetest.CreateClusterDeployment(ctx, t, dyn, "hive-ns", "hub-cd")
//	hivetest.Run(ctx, t, dyn, hivetest.NewRESTMapper(t, cfg), "hive-ns")
//
// What it plays, after Hive's pkg/controller/clustersync:
//   - it reconciles per ClusterDeployment, woken by watches (informers) on
//     SyncSets and ClusterDeployments, never by timers; a failed pass is
//     retried with a short backoff;
//   - it applies each SyncSet whose clusterDeploymentRefs name an existing
//     ClusterDeployment, when the SyncSet is new, its generation moved or its
//     last apply failed: first spec.resources in order, then
//     spec.secretMappings (the source Secret must be in the SyncSet's
//     namespace; its type, data, labels and annotations are copied to the
//     target Secret). Applied objects carry the label
//     hive.openshift.io/managed=true;
//   - it keeps a ClusterSync (hiveinternal.openshift.io/v1alpha1, named after
//     the ClusterDeployment; its CRD is among the test hub's) whose
//     status.syncSets holds, per SyncSet, the observed generation, the result
//     and resourcesToDelete: what it applied while the mode was Sync;
//   - in Sync mode it deletes what a SyncSet stops listing; when the mode
//     becomes Upsert it forgets the resourcesToDelete; when a SyncSet goes it
//     deletes the resourcesToDelete of its last status (so a SyncSet deleted
//     before Hive saw a switch to Upsert still takes its objects with it, as
//     in Hive), and keeps the status only while a deletion fails.
//
// What it does not play: applies are server-side applies with field manager
// "hive" (Hive uses a kubectl-apply-like helper with its last-applied
// annotation); spec.patches, applyBehavior, resource and patch templates,
// SelectorSyncSets, the periodic full re-apply (drift is only repaired when
// the SyncSet changes), ClusterSync conditions, first-success times of the
// ClusterSync itself, leases, the ClusterDeployment's installed, paused,
// unreachable or hibernating states, remote kubeconfigs (the target is the
// same API server), and Hive's metrics.
package hivetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// FieldManager is the field manager the stand-in applies with.
const FieldManager = "hive"

// ManagedLabel is the label Hive puts on every object it applies.
const ManagedLabel = "hive.openshift.io/managed"

// cdKey names a ClusterDeployment: the unit of work, as in Hive.
type cdKey struct{ namespace, name string }

// controller is the stand-in of Hive's clustersync controller.
type controller struct {
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	syncSets cache.GenericLister
	cds      cache.GenericLister
	queue    workqueue.TypedRateLimitingInterface[cdKey]
	logf     func(format string, args ...any)
}

// Run starts the stand-in for the ClusterDeployments of namespace (""
// for every namespace; give each parallel test its own) until ctx ends or
// the test ends. It returns once its watches are synced.
func Run(ctx context.Context, t testing.TB, dyn dynamic.Interface, mapper meta.RESTMapper, namespace string) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	ssInformer, cdInformer := factory.ForResource(hubkind.SyncSet.GVR()), factory.ForResource(hubkind.ClusterDeployment.GVR())
	c := &controller{
		dyn: dyn, mapper: mapper, syncSets: ssInformer.Lister(), cds: cdInformer.Lister(), logf: t.Logf,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[cdKey](10*time.Millisecond, time.Second)),
	}
	_, errSS := ssInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueSyncSet,
		UpdateFunc: func(old, obj any) { c.enqueueSyncSet(old); c.enqueueSyncSet(obj) },
		DeleteFunc: c.enqueueSyncSet,
	})
	_, errCD := cdInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueClusterDeployment,
		UpdateFunc: func(_, obj any) { c.enqueueClusterDeployment(obj) },
	})
	if err := errors.Join(errSS, errCD); err != nil {
		cancel()
		t.Fatalf("hivetest: event handlers: %v", err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		c.queue.ShutDown()
		<-done
		factory.Shutdown()
	})
	go func() {
		defer close(done)
		for c.processNext(ctx) {
		}
	}()
	for gvr, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Fatalf("hivetest: watch of %s did not sync", gvr.Resource)
		}
	}
}

// enqueueSyncSet queues the ClusterDeployments a SyncSet names.
func (c *controller) enqueueSyncSet(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ss, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	for _, cd := range clusterDeploymentRefs(ss) {
		c.queue.Add(cdKey{namespace: ss.GetNamespace(), name: cd})
	}
}

func (c *controller) enqueueClusterDeployment(obj any) {
	if cd, ok := obj.(*unstructured.Unstructured); ok {
		c.queue.Add(cdKey{namespace: cd.GetNamespace(), name: cd.GetName()})
	}
}

// processNext reconciles one ClusterDeployment; false once the queue is shut.
func (c *controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.reconcile(ctx, key); err != nil {
		if ctx.Err() == nil {
			c.logf("hivetest: ClusterDeployment %s/%s: %v (retrying)", key.namespace, key.name, err)
		}
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// errRetry asks for another pass: some SyncSet failed to apply or delete.
var errRetry = errors.New("a SyncSet failed; see the ClusterSync status")

// reconcile applies the SyncSets of a ClusterDeployment and records the
// outcome in its ClusterSync, writing only when the record changes.
func (c *controller) reconcile(ctx context.Context, key cdKey) error {
	obj, err := c.cds.ByNamespace(key.namespace).Get(key.name)
	if apierrors.IsNotFound(err) {
		// Hive lets the ClusterSync go with the ClusterDeployment, owner-referenced.
		return nil
	}
	if err != nil {
		return err
	}
	syncSets, err := c.syncSetsFor(key)
	if err != nil {
		return err
	}
	cs, err := getOrCreateClusterSync(ctx, c.dyn, key.namespace, key.name, obj.(*unstructured.Unstructured))
	if err != nil {
		return err
	}
	old, err := statusesOf(cs)
	if err != nil {
		return err
	}
	statuses := c.applySyncSets(ctx, syncSets, slices.Clone(old))
	if !sameStatuses(old, statuses) {
		if err := setStatuses(cs, statuses); err != nil {
			return err
		}
		if _, err := c.dyn.Resource(hubkind.ClusterSync.GVR()).Namespace(key.namespace).UpdateStatus(ctx, cs, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	for _, st := range statuses {
		if st.Result != ResultSuccess {
			return errRetry
		}
	}
	return nil
}

// syncSetsFor lists the SyncSets naming a ClusterDeployment, by name.
func (c *controller) syncSetsFor(key cdKey) ([]*unstructured.Unstructured, error) {
	objs, err := c.syncSets.ByNamespace(key.namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if ss, ok := o.(*unstructured.Unstructured); ok && slices.Contains(clusterDeploymentRefs(ss), key.name) {
			out = append(out, ss)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

func clusterDeploymentRefs(ss *unstructured.Unstructured) []string {
	refs, _, _ := unstructured.NestedSlice(ss.Object, "spec", "clusterDeploymentRefs")
	var names []string
	for _, r := range refs {
		if r, ok := r.(map[string]any); ok {
			if name, ok := r["name"].(string); ok {
				names = append(names, name)
			}
		}
	}
	return names
}
