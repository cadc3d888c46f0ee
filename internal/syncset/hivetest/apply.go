package hivetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// secretMapping is one entry of a SyncSet's spec.secretMappings.
type secretMapping struct {
	SourceRef struct{ Name, Namespace string } `json:"sourceRef"`
	TargetRef struct{ Name, Namespace string } `json:"targetRef"`
}

// applySyncSets is Hive's applySyncSets for one ClusterDeployment: it
// deletes what SyncSets that are gone applied in Sync mode, then applies the
// SyncSets that need it, and returns the new statuses.
func (c *controller) applySyncSets(ctx context.Context, syncSets []*unstructured.Unstructured, old []SyncStatus) []SyncStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	var out []SyncStatus
	for _, prev := range old {
		if slices.ContainsFunc(syncSets, func(ss *unstructured.Unstructured) bool { return ss.GetName() == prev.Name }) {
			continue
		}
		remaining, err := c.deleteAll(ctx, prev.ResourcesToDelete, nil)
		if err == nil {
			continue // forgotten once its objects are gone
		}
		st := SyncStatus{Name: prev.Name, ResourcesToDelete: remaining, Result: ResultFailure, FailureMessage: err.Error(),
			LastTransitionTime: prev.LastTransitionTime, FirstSuccessTime: prev.FirstSuccessTime}
		if !reflect.DeepEqual(prev, st) {
			st.LastTransitionTime = now
		}
		out = append(out, st)
	}
	for _, ss := range syncSets {
		i := slices.IndexFunc(old, func(st SyncStatus) bool { return st.Name == ss.GetName() })
		if i >= 0 && old[i].Result == ResultSuccess && old[i].ObservedGeneration == ss.GetGeneration() {
			out = append(out, old[i])
			continue
		}
		var prev SyncStatus
		if i >= 0 {
			prev = old[i]
		}
		out = append(out, c.applyOne(ctx, ss, prev, i >= 0, now))
	}
	return out
}

// applyOne applies one SyncSet and computes its status from the previous one.
func (c *controller) applyOne(ctx context.Context, ss *unstructured.Unstructured, prev SyncStatus, seen bool, now metav1.Time) SyncStatus {
	applied, listed, err := c.applySyncSet(ctx, ss)
	st := SyncStatus{Name: ss.GetName(), ObservedGeneration: ss.GetGeneration(), Result: ResultSuccess}
	mode, _, _ := unstructured.NestedString(ss.Object, "spec", "resourceApplyMode")
	if mode == "Sync" {
		st.ResourcesToDelete = applied
	}
	if mode == "Upsert" || mode == "" {
		prev.ResourcesToDelete = nil // Upsert: what was tracked for deletion is left alone
	}
	var failures []string
	if err != nil {
		failures = append(failures, err.Error())
	}
	if seen {
		remaining, err := c.deleteAll(ctx, prev.ResourcesToDelete, func(r ResourceRef) bool { return !slices.Contains(listed, r) })
		if err != nil {
			failures = append(failures, err.Error())
		}
		for _, r := range remaining {
			if !slices.Contains(st.ResourcesToDelete, r) {
				st.ResourcesToDelete = append(st.ResourcesToDelete, r)
			}
		}
		st.LastTransitionTime, st.FirstSuccessTime = prev.LastTransitionTime, prev.FirstSuccessTime
	}
	if len(failures) > 0 {
		st.Result, st.FailureMessage = ResultFailure, strings.Join(failures, "\n")
	}
	if !reflect.DeepEqual(prev, st) {
		st.LastTransitionTime = now
	}
	if st.Result == ResultSuccess && st.FirstSuccessTime == nil {
		st.FirstSuccessTime = &now
	}
	slices.SortFunc(st.ResourcesToDelete, func(a, b ResourceRef) int {
		return cmp.Or(cmp.Compare(a.APIVersion, b.APIVersion), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return st
}

// applySyncSet applies a SyncSet's resources, then its secret mappings. It
// returns what it applied, and what the SyncSet lists (applied or not).
func (c *controller) applySyncSet(ctx context.Context, ss *unstructured.Unstructured) (applied, listed []ResourceRef, err error) {
	resources, _, _ := unstructured.NestedSlice(ss.Object, "spec", "resources")
	var objs []*unstructured.Unstructured
	var decodeErrs []error
	for i, r := range resources {
		m, ok := r.(map[string]any)
		if !ok {
			decodeErrs = append(decodeErrs, fmt.Errorf("failed to decode resource %d", i))
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		objs = append(objs, obj)
		listed = append(listed, ResourceRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
	raw, _, _ := unstructured.NestedFieldCopy(ss.Object, "spec", "secretMappings")
	var mappings []secretMapping
	if b, err := json.Marshal(raw); err == nil && raw != nil {
		if err := json.Unmarshal(b, &mappings); err != nil {
			decodeErrs = append(decodeErrs, fmt.Errorf("failed to decode secretMappings: %w", err))
		}
	}
	secretRefs := make([]ResourceRef, len(mappings))
	for i, m := range mappings {
		secretRefs[i] = ResourceRef{APIVersion: hubkind.Secret.APIVersion(), Kind: hubkind.Secret.Kind, Namespace: m.TargetRef.Namespace, Name: m.TargetRef.Name}
	}
	resourceRefs := listed
	listed = append(slices.Clone(listed), secretRefs...)
	if err := errors.Join(decodeErrs...); err != nil {
		return nil, listed, err
	}
	for i, obj := range objs {
		if err := c.applyObject(ctx, obj); err != nil {
			return resourceRefs[:i], listed, fmt.Errorf("failed to apply resource %d: %w", i, err)
		}
	}
	for i, m := range mappings {
		if err := c.applySecret(ctx, ss, m); err != nil {
			return append(slices.Clone(resourceRefs), secretRefs[:i]...), listed, fmt.Errorf("failed to apply secret %d: %w", i, err)
		}
	}
	return append(slices.Clone(resourceRefs), secretRefs...), listed, nil
}

// applySecret copies a mapping's source Secret to its target.
func (c *controller) applySecret(ctx context.Context, ss *unstructured.Unstructured, m secretMapping) error {
	srcNamespace := m.SourceRef.Namespace
	if srcNamespace == "" {
		srcNamespace = ss.GetNamespace()
	}
	if srcNamespace != ss.GetNamespace() {
		return fmt.Errorf("source secret %s/%s must be in the SyncSet's namespace %s", srcNamespace, m.SourceRef.Name, ss.GetNamespace())
	}
	src, err := c.dyn.Resource(hubkind.Secret.GVR()).Namespace(srcNamespace).Get(ctx, m.SourceRef.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read secret: %w", err)
	}
	target := hubkind.Secret.New(m.TargetRef.Namespace, m.TargetRef.Name)
	target.SetLabels(src.GetLabels())
	target.SetAnnotations(src.GetAnnotations())
	for _, field := range []string{"type", "data"} {
		if v, ok := src.Object[field]; ok {
			target.Object[field] = v
		}
	}
	return c.applyObject(ctx, target)
}

// applyObject server-side applies obj with the hive field manager and label.
func (c *controller) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[ManagedLabel] = "true"
	obj.SetLabels(lbls)
	r, err := c.resourceFor(obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace())
	if err != nil {
		return err
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
}

// deleteAll deletes the refs shouldDelete accepts (nil: all) and returns the
// ones left: not accepted, or failed.
func (c *controller) deleteAll(ctx context.Context, refs []ResourceRef, shouldDelete func(ResourceRef) bool) ([]ResourceRef, error) {
	var remaining []ResourceRef
	var errs []error
	for _, ref := range refs {
		if shouldDelete != nil && !shouldDelete(ref) {
			remaining = append(remaining, ref)
			continue
		}
		r, err := c.resourceFor(ref.APIVersion, ref.Kind, ref.Namespace)
		if err == nil {
			policy := metav1.DeletePropagationBackground
			err = r.Delete(ctx, ref.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to delete %s, Kind=%s %s/%s: %w", ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, err))
			remaining = append(remaining, ref)
		}
	}
	return remaining, errors.Join(errs...)
}

// resourceFor maps a kind to its resource on the target, in namespace
// ("default" for a namespaced kind without one, as kubectl apply does).
func (c *controller) resourceFor(apiVersion, kind, namespace string) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	mapping, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if resettable, ok := c.mapper.(meta.ResettableRESTMapper); ok && meta.IsNoMatchError(err) {
		resettable.Reset()
		mapping, err = c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	}
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dyn.Resource(mapping.Resource), nil
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return c.dyn.Resource(mapping.Resource).Namespace(namespace), nil
}

// sameStatuses compares statuses as the API server stores them.
func sameStatuses(a, b []SyncStatus) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && (len(a) == 0 && len(b) == 0 || string(ja) == string(jb))
}
