package fleet

import (
	"maps"
	"strings"
)

// PolicyHubConfig is where and how a deployment places configuration
// policies on its hubs.
type PolicyHubConfig struct {
	// Namespace holds the policies, their Placements and PlacementBindings
	// on every hub.
	Namespace string
	// ClusterSet is the ManagedClusterSet the Placements select from, bound
	// into Namespace ("global" holds every cluster of an RHACM hub).
	ClusterSet string
}

// DesiredPolicy is one policy's objects for a hub.
type DesiredPolicy struct {
	PolicyID   string
	Generation int64
	Objects    []map[string]any
	// Failure, when set, is why the objects could not be rendered; the
	// entry goes without them.
	Failure *DeliveryFailure
}

// HubPolicyName is a policy's name on the hubs: its name and a short suffix
// of its id, short enough that the policy framework's replicated policies,
// named "<namespace>.<name>", stay within 63 characters.
func HubPolicyName(p Policy, namespace string) string {
	id := strings.ReplaceAll(p.ID, "-", "")
	suffix := id[max(0, len(id)-8):]
	limit := 63 - len(namespace) - 1 - len(suffix) - 1
	name := p.Name
	if len(name) > limit {
		name = strings.TrimRight(name[:max(limit, 0)], "-.")
	}
	return name + "-" + suffix
}

// PolicyHubObjects renders a policy for one hub, in apply order: the policy
// namespace and its ManagedClusterSetBinding (shared by every policy, so
// not labelled with a policy id), then the Policy, a Placement selecting
// the clusters of the policy's selector and a PlacementBinding tying them.
// On a hub shared between organisations (ownedByOrg false) the Placement
// also requires the organisation's label, so a policy never reaches another
// organisation's cluster.
func PolicyHubObjects(p Policy, hubID string, ownedByOrg bool, cfg PolicyHubConfig) DesiredPolicy {
	name := HubPolicyName(p, cfg.Namespace)
	shared := map[string]any{LabelManagedBy: ManagedByAgent, LabelHubID: hubID}
	own := maps.Clone(shared)
	own[LabelPolicyID], own[LabelOrgID] = p.ID, p.OrgID

	meta, _ := p.Body["metadata"].(map[string]any)
	policyLabels := map[string]any{}
	if l, ok := meta["labels"].(map[string]any); ok {
		maps.Copy(policyLabels, l)
	}
	maps.Copy(policyLabels, own)
	policyMeta := map[string]any{"name": name, "namespace": cfg.Namespace, "labels": policyLabels}
	if a, ok := meta["annotations"].(map[string]any); ok && len(a) > 0 {
		policyMeta["annotations"] = maps.Clone(a)
	}
	policy := map[string]any{"apiVersion": PolicyAPIVersion, "kind": PolicyKind, "metadata": policyMeta}
	if spec, ok := p.Body["spec"]; ok {
		policy["spec"] = spec
	}

	selector := p.Selector
	if !ownedByOrg {
		selector.MatchLabels = maps.Clone(selector.MatchLabels)
		if selector.MatchLabels == nil {
			selector.MatchLabels = map[string]string{}
		}
		selector.MatchLabels[LabelOrgID] = p.OrgID
	}
	objects := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": cfg.Namespace, "labels": maps.Clone(shared)}},
		{
			"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
			"metadata": map[string]any{"name": cfg.ClusterSet, "namespace": cfg.Namespace, "labels": maps.Clone(shared)},
			"spec":     map[string]any{"clusterSet": cfg.ClusterSet},
		},
		policy,
		{
			"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
			"metadata": map[string]any{"name": name, "namespace": cfg.Namespace, "labels": maps.Clone(own)},
			"spec": map[string]any{
				"clusterSets": []any{cfg.ClusterSet},
				"predicates":  []any{map[string]any{"requiredClusterSelector": map[string]any{"labelSelector": selector.Object()}}},
			},
		},
		{
			"apiVersion": PolicyAPIVersion, "kind": "PlacementBinding",
			"metadata":     map[string]any{"name": name, "namespace": cfg.Namespace, "labels": maps.Clone(own)},
			"placementRef": map[string]any{"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": name},
			"subjects":     []any{map[string]any{"apiGroup": "policy.open-cluster-management.io", "kind": PolicyKind, "name": name}},
		},
	}
	return DesiredPolicy{PolicyID: p.ID, Generation: p.Generation, Objects: objects}
}

// Object renders the selector as a Kubernetes LabelSelector.
func (s LabelSelector) Object() map[string]any {
	out := map[string]any{}
	if len(s.MatchLabels) > 0 {
		ml := make(map[string]any, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			ml[k] = v
		}
		out["matchLabels"] = ml
	}
	if len(s.MatchExpressions) > 0 {
		exprs := make([]any, len(s.MatchExpressions))
		for i, e := range s.MatchExpressions {
			expr := map[string]any{"key": e.Key, "operator": string(e.Operator)}
			if len(e.Values) > 0 {
				values := make([]any, len(e.Values))
				for j, v := range e.Values {
					values[j] = v
				}
				expr["values"] = values
			}
			exprs[i] = expr
		}
		out["matchExpressions"] = exprs
	}
	return out
}
