package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// policyOwnedResources are the kinds of a policy's own hub objects, the ones
// labelled with its id, in the order stale ones are deleted: what ties the
// Policy to its clusters first. The policy namespace and its
// ManagedClusterSetBinding are shared by every policy and never deleted.
var policyOwnedResources = []schema.GroupVersionResource{
	hubkind.PlacementBinding.GVR(), hubkind.Placement.GVR(), hubkind.Policy.GVR(),
}

// policyObjectKey names one hub object of the desired policies.
type policyObjectKey struct {
	group, kind, namespace, name string
}

// desiredPolicies returns the set's policies; an absent list is none.
func desiredPolicies(set *private.DesiredSet) []private.DesiredPolicy {
	if set.Policies == nil {
		return nil
	}
	return *set.Policies
}

// syncPolicies applies the set's policies, then deletes the policy objects
// the agent applied before that the set no longer holds: those of policies
// that left it, and those a policy had under another name. Each policy is an
// entry of its own in f; what a failed policy has on the hub stays.
func (a *applier) syncPolicies(ctx context.Context, set *private.DesiredSet, f *entryFailures) {
	policies := desiredPolicies(set)
	want := map[policyObjectKey]bool{}
	// keep holds the policies whose objects cannot be read: all they have
	// on the hub stays.
	keep := map[string]bool{}
	for _, p := range policies {
		if p.Failure != nil {
			keep[p.PolicyId] = true
		}
		for _, o := range p.Objects {
			key, err := kubeObjectKey(o)
			if err != nil {
				keep[p.PolicyId] = true
				continue
			}
			want[key] = true
		}
	}
	shared := map[string]bool{}
	for _, p := range policies {
		f.add(a.applyPolicy(ctx, p, shared), func(e *private.EntryFailure) { e.PolicyId = &p.PolicyId })
	}
	if err := a.removeStalePolicies(ctx, want, keep); err != nil {
		f.transient = append(f.transient, err)
	}
}

// kubeObjectKey returns the key of an object of the desired set, read from
// its fields as sent, so that even an object that fails to apply keeps what
// the hub holds under its name.
func kubeObjectKey(raw json.RawMessage) (policyObjectKey, error) {
	var o struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return policyObjectKey{}, err
	}
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return policyObjectKey{group: gv.Group, kind: o.Kind, namespace: o.Metadata.Namespace, name: o.Metadata.Name}, nil
}

// applyPolicy applies one policy's objects in their order (namespace
// first). The objects every policy shares (without the policy-id label) are
// applied once a pass: shared holds the bodies already applied.
func (a *applier) applyPolicy(ctx context.Context, p private.DesiredPolicy, shared map[string]bool) error {
	if err := failureOf(p.Failure); err != nil {
		return fmt.Errorf("applyPolicy(%s): %w", p.PolicyId, err)
	}
	objects, err := decodeObjects(p.Objects)
	if err != nil {
		return fmt.Errorf("applyPolicy(%s): %w", p.PolicyId, err)
	}
	for i, obj := range objects {
		_, own := obj.GetLabels()[fleet.LabelPolicyID]
		var body string
		if !own {
			b, err := obj.MarshalJSON()
			if err != nil {
				return fmt.Errorf("applyPolicy(%s): objects[%d]: %w", p.PolicyId, i, err)
			}
			if body = string(b); shared[body] {
				continue
			}
		}
		if err := a.applyObject(ctx, obj); err != nil {
			return fmt.Errorf("applyPolicy(%s): %w", p.PolicyId, err)
		}
		if !own {
			shared[body] = true
		}
	}
	return nil
}

// policyOwnedSelector selects the policy objects the agent of hubID applied.
// The policy framework copies a root Policy's labels onto the policies it
// replicates into the clusters' namespaces, adding the root-policy label:
// those are the framework's, so they are left out.
func policyOwnedSelector(hubID string) string {
	managed, _ := labels.NewRequirement(fleet.LabelManagedBy, selection.Equals, []string{fleet.ManagedByAgent})
	hub, _ := labels.NewRequirement(fleet.LabelHubID, selection.Equals, []string{hubID})
	withID, _ := labels.NewRequirement(fleet.LabelPolicyID, selection.Exists, nil)
	notReplicated, _ := labels.NewRequirement(fleet.LabelRootPolicy, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*managed, *hub, *withID, *notReplicated).String()
}

// removeStalePolicies deletes, in every namespace, the Policies, Placements
// and PlacementBindings the agent applied whose kind, namespace and name
// are not in want, except those of the policies in keep. A kind the hub
// does not serve holds nothing to remove.
func (a *applier) removeStalePolicies(ctx context.Context, want map[policyObjectKey]bool, keep map[string]bool) error {
	sel := metav1.ListOptions{LabelSelector: policyOwnedSelector(a.hubID)}
	var errs []error
	for _, gvr := range policyOwnedResources {
		res := a.hub.Dynamic.Resource(gvr)
		list, err := res.List(ctx, sel)
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removeStalePolicies: list %s: %w", gvr.Resource, err))
			continue
		}
		for _, obj := range list.Items {
			key := policyObjectKey{group: gvr.Group, kind: obj.GetKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
			if want[key] || keep[obj.GetLabels()[fleet.LabelPolicyID]] || obj.GetDeletionTimestamp() != nil {
				continue
			}
			a.logger.Info("deleting object of a removed policy", "kind", key.kind, "namespace", key.namespace, "name", key.name,
				"policy_id", obj.GetLabels()[fleet.LabelPolicyID])
			if err := res.Namespace(key.namespace).Delete(ctx, key.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removeStalePolicies: delete %s %s/%s: %w", key.kind, key.namespace, key.name, err))
			}
		}
	}
	return errors.Join(errs...)
}
