package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// deletionPoll is how often a removed ManagedCluster is looked up until gone.
const deletionPoll = 500 * time.Millisecond

// applier makes the hub hold a desired set: it applies every registration's
// objects and removes the registrations that left the set.
type applier struct {
	hub             *Hub
	hubID           string
	fieldManager    string
	deletionTimeout time.Duration
	logger          *slog.Logger
}

// applySet applies set, then removes what the agent applied before and the
// set no longer holds: registrations first, then policies. Each entry (a
// registration's or a policy's objects) is decoded and applied on its own:
// one whose objects the hub refuses, or that cannot even be read, is a
// failure of that entry only, returned in failures, and the pass goes on.
// err holds the errors that concern the pass itself (the hub unreachable, a
// removal that did not finish): the pass is then retried.
func (a *applier) applySet(ctx context.Context, set *private.DesiredSet) (failures []private.EntryFailure, err error) {
	var f entryFailures
	want := make(map[string]bool, len(set.Registrations))
	for _, reg := range set.Registrations {
		want[reg.RegistrationId] = true
		f.add(a.applyRegistration(ctx, reg), func(e *private.EntryFailure) { e.RegistrationId = &reg.RegistrationId })
	}
	if err := a.removeStale(ctx, want); err != nil {
		f.transient = append(f.transient, err)
	}
	a.syncPolicies(ctx, set, &f)
	return f.items, errors.Join(f.transient...)
}

// applyDelta applies what delta changed in set, the whole set it made of
// the applied one: the registrations it published anew, the removal of those
// it withdrew (when it withdrew any), and the policies, which come whole in
// every answer. The failures of the entries it did not touch carry over from
// before, the failures of the base set: they are still on record until a
// retry or a later change applies them.
func (a *applier) applyDelta(ctx context.Context, set, delta *private.DesiredSet, before []private.EntryFailure) ([]private.EntryFailure, error) {
	var f entryFailures
	changed := make(map[string]bool, len(delta.Registrations))
	for _, reg := range delta.Registrations {
		changed[reg.RegistrationId] = true
		f.add(a.applyRegistration(ctx, reg), func(e *private.EntryFailure) { e.RegistrationId = &reg.RegistrationId })
	}
	want := make(map[string]bool, len(set.Registrations))
	for _, reg := range set.Registrations {
		want[reg.RegistrationId] = true
	}
	for _, e := range before {
		if e.RegistrationId != nil && want[*e.RegistrationId] && !changed[*e.RegistrationId] {
			f.items = append(f.items, e)
		}
	}
	if delta.RemovedRegistrations != nil && len(*delta.RemovedRegistrations) > 0 {
		if err := a.removeStale(ctx, want); err != nil {
			f.transient = append(f.transient, err)
		}
	}
	a.syncPolicies(ctx, set, &f)
	return f.items, errors.Join(f.transient...)
}

// retryFailed applies again the entries of set that failed, and only them
// (nothing is removed): a kind installed since, or a namespace that ended
// its termination, lets them pass. It returns those that still fail.
func (a *applier) retryFailed(ctx context.Context, set *private.DesiredSet, failed []private.EntryFailure) ([]private.EntryFailure, error) {
	regs, pols := map[string]bool{}, map[string]bool{}
	for _, e := range failed {
		if e.RegistrationId != nil {
			regs[*e.RegistrationId] = true
		}
		if e.PolicyId != nil {
			pols[*e.PolicyId] = true
		}
	}
	var f entryFailures
	for _, reg := range set.Registrations {
		if regs[reg.RegistrationId] {
			f.add(a.applyRegistration(ctx, reg), func(e *private.EntryFailure) { e.RegistrationId = &reg.RegistrationId })
		}
	}
	shared := map[string]bool{}
	for _, p := range desiredPolicies(set) {
		if pols[p.PolicyId] {
			f.add(a.applyPolicy(ctx, p, shared), func(e *private.EntryFailure) { e.PolicyId = &p.PolicyId })
		}
	}
	return f.items, errors.Join(f.transient...)
}

// applyRegistration applies one registration's objects in their order
// (namespace first). The auto-import secret is left out once the cluster
// joined: RHACM deletes it after the import, and applying it again would
// import the cluster again.
func (a *applier) applyRegistration(ctx context.Context, reg private.DesiredRegistration) error {
	if err := failureOf(reg.Failure); err != nil {
		return fmt.Errorf("applyRegistration(%s): %w", reg.RegistrationId, err)
	}
	objects, err := decodeObjects(reg.Objects)
	if err != nil {
		return fmt.Errorf("applyRegistration(%s): %w", reg.RegistrationId, err)
	}
	joined, err := a.clusterJoined(ctx, reg.ManagedClusterName)
	if err != nil {
		return fmt.Errorf("applyRegistration(%s): %w", reg.RegistrationId, err)
	}
	for _, obj := range objects {
		if joined && obj.GetKind() == hubkind.Secret.Kind && obj.GetName() == fleet.AutoImportSecretName {
			continue
		}
		if err := a.applyObject(ctx, obj); err != nil {
			return fmt.Errorf("applyRegistration(%s): %w", reg.RegistrationId, err)
		}
	}
	return nil
}

func (a *applier) clusterJoined(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	mc, err := a.hub.Dynamic.Resource(managedClusterGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get ManagedCluster %s: %w", name, err)
	}
	return hubConditionStatus(mc, fleet.HubConditionJoined) == string(fleet.ConditionTrue), nil
}

// decodeObjects decodes an entry's objects, each as it came: one that is not
// a named Kubernetes object fails the entry, before anything of it is applied.
func decodeObjects(raw []json.RawMessage) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(raw))
	for i, b := range raw {
		obj, err := hubkind.Decode(b)
		if errors.Is(err, hubkind.ErrUnnamed) {
			return nil, invalidEntry(ReasonObjectInvalid, fmt.Errorf("objects[%d]: %w", i, err))
		}
		if err != nil {
			return nil, invalidEntry(fleet.ReasonObjectUnreadable, fmt.Errorf("objects[%d]: %w", i, err))
		}
		out = append(out, obj)
	}
	return out, nil
}

// applyObject server-side applies obj, forcing ownership of its fields.
func (a *applier) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.hub.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A CRD installed since discovery was cached: look again, once.
		a.hub.Mapper.Reset()
		mapping, err = a.hub.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("applyObject(%s %s): %w", gvk.Kind, obj.GetName(), err)
	}
	ri := a.hub.Dynamic.Resource(mapping.Resource)
	var r dynamic.ResourceInterface = ri
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return invalidEntry(ReasonObjectInvalid, fmt.Errorf("applyObject(%s %s): namespaced kind without a namespace", gvk.Kind, obj.GetName()))
		}
		r = ri.Namespace(obj.GetNamespace())
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("applyObject(%s %s): %w", gvk.Kind, obj.GetName(), err)
	}
	force := true
	if _, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: a.fieldManager, Force: &force}); err != nil {
		return fmt.Errorf("applyObject(%s %s/%s): %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// ownedSelector selects what the agent of hubID applied for some
// registration; another hub's agent sharing the API server (as in tests)
// owns the rest.
func ownedSelector(hubID string) string {
	managed, _ := labels.NewRequirement(fleet.LabelManagedBy, selection.Equals, []string{fleet.ManagedByAgent})
	hub, _ := labels.NewRequirement(fleet.LabelHubID, selection.Equals, []string{hubID})
	withID, _ := labels.NewRequirement(fleet.LabelRegistrationID, selection.Exists, nil)
	return labels.NewSelector().Add(*managed, *hub, *withID).String()
}

// removeStale takes off the hub what registrations that left the set had
// there. A capacity pool's cluster goes first: its ClusterDeployment,
// MachinePools and ClusterImageSet are deleted, and Hive deprovisions the
// cluster in its own time; the agent does not wait for it (a deprovision
// takes longer than a pass should), but keeps the cluster's namespace, which
// holds the credentials Hive deprovisions with, until the ClusterDeployment
// is gone. The fleet manager learns that from the resource database
// (ClusterDeployment is a synced kind). Then the ManagedClusters are deleted
// and waited for (RHACM's finalizers detach the cluster first), and last the
// namespaces, which hold the rest of their objects.
func (a *applier) removeStale(ctx context.Context, want map[string]bool) error {
	sel := metav1.ListOptions{LabelSelector: ownedSelector(a.hubID)}
	stale := func(items []unstructured.Unstructured) []unstructured.Unstructured {
		var out []unstructured.Unstructured
		for _, o := range items {
			if !want[o.GetLabels()[fleet.LabelRegistrationID]] {
				out = append(out, o)
			}
		}
		return out
	}
	var errs []error
	cds, err := a.deleteStale(ctx, clusterDeploymentGVR, "ClusterDeployment", sel, want)
	switch {
	case err != nil && cds == nil:
		return err // without the list, no namespace may go: it may hold a deprovision's credentials
	case err != nil:
		errs = append(errs, err)
	}
	mcs, err := a.hub.Dynamic.Resource(managedClusterGVR).List(ctx, sel)
	if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removeStale: list ManagedClusters: %w", err)
	}
	var gone []string
	if mcs != nil {
		if gone, err = a.deleteClusters(ctx, stale(mcs.Items)); err != nil {
			return err
		}
	}
	// Hive deletes a cluster's MachinePools only with their namespace;
	// deleted here, they leave the hub with their cluster. A ClusterImageSet
	// is cluster-scoped: no namespace takes it along.
	for _, k := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{machinePoolGVR, "MachinePool"}, {clusterImageSetGVR, "ClusterImageSet"}} {
		if _, err := a.deleteStale(ctx, k.gvr, k.kind, sel, want); err != nil {
			errs = append(errs, err)
		}
	}
	nss, err := a.hub.Dynamic.Resource(namespaceGVR).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("removeStale: list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		if want[ns.GetLabels()[fleet.LabelRegistrationID]] || ns.GetDeletionTimestamp() != nil {
			continue
		}
		if mcs != nil && !slices.Contains(gone, ns.GetName()) && hasItem(mcs.Items, ns.GetName()) {
			continue // its cluster is still there
		}
		if cds != nil && hasNamespaced(cds.Items, ns.GetName()) {
			continue // Hive is still deprovisioning its cluster, with its credentials
		}
		a.logger.Info("deleting namespace of a removed registration", "namespace", ns.GetName(), "registration_id", ns.GetLabels()[fleet.LabelRegistrationID])
		if err := a.hub.Dynamic.Resource(namespaceGVR).Delete(ctx, ns.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removeStale: delete namespace %s: %w", ns.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// deleteStale lists the objects of gvr the agent owns on its hub and deletes
// those of registrations that left the set, unless already being deleted,
// without waiting for them. It returns the list, nil when the hub does not
// serve the kind.
func (a *applier) deleteStale(ctx context.Context, gvr schema.GroupVersionResource, kind string, sel metav1.ListOptions,
	want map[string]bool) (*unstructured.UnstructuredList, error) {
	list, err := a.hub.Dynamic.Resource(gvr).List(ctx, sel)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("removeStale: list %ss: %w", kind, err)
	}
	var errs []error
	for _, o := range list.Items {
		if want[o.GetLabels()[fleet.LabelRegistrationID]] || o.GetDeletionTimestamp() != nil {
			continue
		}
		a.logger.Info("deleting "+kind+" of a removed registration", "name", o.GetName(), "namespace", o.GetNamespace(),
			"registration_id", o.GetLabels()[fleet.LabelRegistrationID])
		res := a.hub.Dynamic.Resource(gvr).Namespace(o.GetNamespace())
		if err := res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removeStale: delete %s %s: %w", kind, o.GetName(), err))
		}
	}
	return list, errors.Join(errs...)
}

// hasNamespaced reports whether an object of items lives in namespace ns.
func hasNamespaced(items []unstructured.Unstructured, ns string) bool {
	return slices.ContainsFunc(items, func(u unstructured.Unstructured) bool { return u.GetNamespace() == ns })
}

func hasItem(items []unstructured.Unstructured, name string) bool {
	return slices.ContainsFunc(items, func(u unstructured.Unstructured) bool { return u.GetName() == name })
}

// deleteClusters deletes the stale ManagedClusters, then waits for all of
// them together until gone. Each may take the deletion timeout from when its
// deletion began, so a cluster whose detach is stuck costs a later pass one
// look, not another full wait, and new registrations keep being applied. It
// returns the names of those gone.
func (a *applier) deleteClusters(ctx context.Context, stale []unstructured.Unstructured) ([]string, error) {
	if len(stale) == 0 {
		return nil, nil
	}
	res := a.hub.Dynamic.Resource(managedClusterGVR)
	now := time.Now()
	var (
		pending []string
		began   []time.Time
	)
	for _, mc := range stale {
		pending = append(pending, mc.GetName())
		if ts := mc.GetDeletionTimestamp(); ts != nil {
			began = append(began, ts.Time)
			continue
		}
		a.logger.Info("deleting ManagedCluster of a removed registration", "managed_cluster", mc.GetName(),
			"registration_id", mc.GetLabels()[fleet.LabelRegistrationID])
		if err := res.Delete(ctx, mc.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleteClusters: delete ManagedCluster %s: %w", mc.GetName(), err)
		}
		began = append(began, now)
	}
	deadline := now.Add(deletionWait(now, a.deletionTimeout, began))
	var gone []string
	for {
		var still []string
		for _, name := range pending {
			_, err := res.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				gone = append(gone, name)
			case err != nil:
				return gone, fmt.Errorf("deleteClusters: get ManagedCluster %s: %w", name, err)
			default:
				still = append(still, name)
			}
		}
		if pending = still; len(pending) == 0 {
			return gone, nil
		}
		if !time.Now().Before(deadline) {
			return gone, fmt.Errorf("deleteClusters: ManagedClusters %v not gone within %s of their deletion", pending, a.deletionTimeout)
		}
		if !sleep(ctx, min(deletionPoll, time.Until(deadline))) {
			return gone, ctx.Err()
		}
	}
}

// deletionWait is how long to wait now for clusters whose deletions began at
// the given times: until the last one's timeout, never more than timeout.
func deletionWait(now time.Time, timeout time.Duration, began []time.Time) time.Duration {
	var wait time.Duration
	for _, b := range began {
		wait = max(wait, b.Add(timeout).Sub(now))
	}
	return min(wait, timeout)
}
