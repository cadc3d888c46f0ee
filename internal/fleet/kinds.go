package fleet

import "strings"

// ResourceKind is one Kubernetes kind the agents sync from every hub: what
// the agent watches (group, version, resource) and how the fleet manager
// stores and queries it. Every kind but ManagedCluster is stored in the one
// generic table, resources; see docs/resource-database.md.
type ResourceKind struct {
	Group    string
	Version  string
	Kind     string
	Resource string // the plural, as the hub's API serves it
	// Namespaced is false for cluster-scoped kinds, whose namespace is ''.
	Namespaced bool
	// Table is set only for a kind with its own table; it is then not in the
	// resources table nor in the agent's generic sync.
	Table string
	// ClusterNamespace says the object's namespace is its managed cluster's
	// name (ManagedClusterInfo, a policy replicated to a cluster): the
	// resources.cluster_name column is then filled with it, for the joins
	// of the standard cluster schema.
	ClusterNamespace bool
	// Fields are the kind's own search fields of GET /admin/resources, each
	// a path into the object's body. They are read from body (no column);
	// one queried often gets an index in a migration.
	Fields []ResourceField
}

// ResourceField is a search field of one kind: Name in the search language,
// Path the JSON path of its value in the object (e.g. status, consoleURL).
type ResourceField struct {
	Name string
	Path []string
}

// ManagedClusterKind is the one kind with its own table, managed_clusters:
// it is linked to registrations (the registration-id label, checked
// against the hub's placements), its claims and conditions are columns of
// the standard schema, and its ingest path predates the generic one.
func ManagedClusterKind() ResourceKind {
	return ResourceKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster",
		Resource: "managedclusters", Table: "managed_clusters"}
}

// ResourceKinds returns the registry: every kind the fleet manager keeps,
// ManagedCluster first. Adding a kind is one entry here, the same kind
// declared in internal/hubkind (whose tests hold the two together and to the
// hub's CRDs), plus its round-trip test (docs/resource-database.md, "Adding
// a kind").
func ResourceKinds() []ResourceKind {
	return []ResourceKind{
		ManagedClusterKind(),
		{
			Group: "internal.open-cluster-management.io", Version: "v1beta1", Kind: "ManagedClusterInfo",
			Resource: "managedclusterinfos", Namespaced: true, ClusterNamespace: true,
			Fields: []ResourceField{
				{Name: "console_url", Path: []string{"status", "consoleURL"}},
				{Name: "kube_vendor", Path: []string{"status", "kubeVendor"}},
				{Name: "cloud_vendor", Path: []string{"status", "cloudVendor"}},
				{Name: "openshift_version", Path: []string{"status", "distributionInfo", "ocp", "version"}},
			},
		},
		{
			Group: "cluster.open-cluster-management.io", Version: "v1beta2", Kind: "ManagedClusterSet",
			Resource: "managedclustersets",
			Fields:   []ResourceField{{Name: "selector_type", Path: []string{"spec", "clusterSelector", "selectorType"}}},
		},
		{
			Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "Placement",
			Resource: "placements", Namespaced: true,
		},
		{
			Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "PlacementDecision",
			Resource: "placementdecisions", Namespaced: true,
		},
		// A capacity pool's clusters as Hive reports them (docs/capacity-pools.md).
		{
			Group: "hive.openshift.io", Version: "v1", Kind: "ClusterDeployment",
			Resource: "clusterdeployments", Namespaced: true, ClusterNamespace: true,
			Fields: []ResourceField{
				{Name: "installed", Path: []string{"spec", "installed"}},
				{Name: "power_state", Path: []string{"status", "powerState"}},
				{Name: "api_url", Path: []string{"status", "apiURL"}},
			},
		},
		{
			Group: "hive.openshift.io", Version: "v1", Kind: "MachinePool",
			Resource: "machinepools", Namespaced: true, ClusterNamespace: true,
			Fields: []ResourceField{{Name: "pool", Path: []string{"spec", "name"}}},
		},
		// A pool's add-ons on its clusters, with what the work agent applied.
		{
			Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork",
			Resource: "manifestworks", Namespaced: true, ClusterNamespace: true,
		},
		{
			Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy",
			Resource: "policies", Namespaced: true,
			Fields: []ResourceField{
				{Name: "compliant", Path: []string{"status", "compliant"}},
				{Name: "remediation_action", Path: []string{"spec", "remediationAction"}},
			},
		},
	}
}

// SyncedResourceKinds returns the kinds of the generic path: those the
// agents sync into the resources table.
func SyncedResourceKinds() []ResourceKind {
	var out []ResourceKind
	for _, k := range ResourceKinds() {
		if k.Table == "" {
			out = append(out, k)
		}
	}
	return out
}

// FindResourceKind returns the generic kind named kind (case-insensitive,
// as "Policy" or "policies"), or false.
func FindResourceKind(kind string) (ResourceKind, bool) {
	for _, k := range SyncedResourceKinds() {
		if strings.EqualFold(k.Kind, kind) || strings.EqualFold(k.Resource, kind) {
			return k, true
		}
	}
	return ResourceKind{}, false
}

// FindSyncedKind returns the generic kind of group and kind, or false.
func FindSyncedKind(group, kind string) (ResourceKind, bool) {
	for _, k := range SyncedResourceKinds() {
		if k.Group == group && k.Kind == kind {
			return k, true
		}
	}
	return ResourceKind{}, false
}
