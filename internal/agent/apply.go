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
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
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
// set no longer holds: registrations first, then policies. It goes on past
// a failing registration or policy, so one bad object does not hold back
// the others, and returns every error.
func (a *applier) applySet(ctx context.Context, set *private.DesiredSet) error {
	var errs []error
	want := make(map[string]bool, len(set.Registrations))
	for _, reg := range set.Registrations {
		want[reg.RegistrationId] = true
		if err := a.applyRegistration(ctx, reg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.removeStale(ctx, want); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, a.syncPolicies(ctx, set)...)
	return errors.Join(errs...)
}

// applyRegistration applies one registration's objects in their order
// (namespace first). The auto-import secret is left out once the cluster
// joined: RHACM deletes it after the import, and applying it again would
// import the cluster again.
func (a *applier) applyRegistration(ctx context.Context, reg private.DesiredRegistration) error {
	joined, err := a.clusterJoined(ctx, reg.ManagedClusterName)
	if err != nil {
		return fmt.Errorf("applyRegistration(%s): %w", reg.RegistrationId, err)
	}
	for i, o := range reg.Objects {
		obj, err := toUnstructured(o)
		if err != nil {
			return fmt.Errorf("applyRegistration(%s): objects[%d]: %w", reg.RegistrationId, i, err)
		}
		if joined && obj.GetKind() == "Secret" && obj.GetName() == fleet.AutoImportSecretName {
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

// toUnstructured turns an object of the desired set into an unstructured one.
func toUnstructured(o private.KubeObject) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s without a name", obj.GetKind())
	}
	return obj, nil
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
			return fmt.Errorf("applyObject(%s %s): namespaced kind without a namespace", gvk.Kind, obj.GetName())
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

// removeStale deletes the ManagedClusters of registrations that left the set
// and waits until they are gone (RHACM's finalizers detach the cluster
// first), then deletes their namespaces, which hold the rest of their objects.
func (a *applier) removeStale(ctx context.Context, want map[string]bool) error {
	sel := metav1.ListOptions{LabelSelector: ownedSelector(a.hubID)}
	mcs, err := a.hub.Dynamic.Resource(managedClusterGVR).List(ctx, sel)
	if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removeStale: list ManagedClusters: %w", err)
	}
	var gone []string
	if mcs != nil {
		var stale []unstructured.Unstructured
		for _, mc := range mcs.Items {
			if !want[mc.GetLabels()[fleet.LabelRegistrationID]] {
				stale = append(stale, mc)
			}
		}
		if gone, err = a.deleteClusters(ctx, stale); err != nil {
			return err
		}
	}
	nss, err := a.hub.Dynamic.Resource(namespaceGVR).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("removeStale: list namespaces: %w", err)
	}
	var errs []error
	for _, ns := range nss.Items {
		if want[ns.GetLabels()[fleet.LabelRegistrationID]] || ns.GetDeletionTimestamp() != nil {
			continue
		}
		if mcs != nil && !slices.Contains(gone, ns.GetName()) && hasItem(mcs.Items, ns.GetName()) {
			continue // its cluster is still there
		}
		a.logger.Info("deleting namespace of a removed registration", "namespace", ns.GetName(), "registration_id", ns.GetLabels()[fleet.LabelRegistrationID])
		if err := a.hub.Dynamic.Resource(namespaceGVR).Delete(ctx, ns.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removeStale: delete namespace %s: %w", ns.GetName(), err))
		}
	}
	return errors.Join(errs...)
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
