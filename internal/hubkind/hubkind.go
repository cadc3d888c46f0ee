// Package hubkind is the one home of the hub's kinds: every kind of object
// the fleet manager, its agent, its SyncSet deliveries and their test hubs
// read or write on a hub or a Hive cluster, declared once with its group,
// version, kind, resource and scope, and the one conversion of an object to
// the dynamic client's *unstructured.Unstructured.
//
// The domain (internal/fleet) imports only the standard library, so its
// registry of reported kinds and the objects it renders spell their
// group and version as strings; the tests of this package hold them to
// the kinds declared here, and these to the hub's CRDs.
package hubkind

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is one kind a hub serves: what the dynamic client needs to reach its
// objects (group, version, resource) and to build one (apiVersion, kind).
type Kind struct {
	Group   string
	Version string
	Kind    string
	// Resource is the plural, as the hub's API serves it.
	Resource string
	// Namespaced is false for cluster-scoped kinds.
	Namespaced bool
}

// The kinds of the API server itself.
var (
	// Namespace holds a registration's hub objects, the policies' and a
	// ClusterDeployment's SyncSets.
	Namespace = Kind{Version: "v1", Kind: "Namespace", Resource: "namespaces"}
	// Secret carries import material, auto-import credentials and the
	// source Secrets of a SyncSet's secret mappings.
	Secret = Kind{Version: "v1", Kind: "Secret", Resource: "secrets", Namespaced: true}
	// CustomResourceDefinition is what test hubs install the hub's kinds with.
	CustomResourceDefinition = Kind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition",
		Resource: "customresourcedefinitions"}
)

// The kinds of RHACM and Open Cluster Management.
var (
	// ManagedCluster is a registration's cluster on its hub.
	ManagedCluster = Kind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster",
		Resource: "managedclusters"}
	// ManagedClusterInfo is what the hub learnt of a joined cluster.
	ManagedClusterInfo = Kind{Group: "internal.open-cluster-management.io", Version: "v1beta1", Kind: "ManagedClusterInfo",
		Resource: "managedclusterinfos", Namespaced: true}
	// ManagedClusterSet groups the clusters a Placement selects from.
	ManagedClusterSet = Kind{Group: "cluster.open-cluster-management.io", Version: "v1beta2", Kind: "ManagedClusterSet",
		Resource: "managedclustersets"}
	// ManagedClusterSetBinding binds a ManagedClusterSet into the policy namespace.
	ManagedClusterSetBinding = Kind{Group: "cluster.open-cluster-management.io", Version: "v1beta2", Kind: "ManagedClusterSetBinding",
		Resource: "managedclustersetbindings", Namespaced: true}
	// Placement selects the clusters of a policy.
	Placement = Kind{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "Placement",
		Resource: "placements", Namespaced: true}
	// PlacementDecision lists the clusters a Placement selected.
	PlacementDecision = Kind{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "PlacementDecision",
		Resource: "placementdecisions", Namespaced: true}
	// KlusterletAddonConfig turns a registration's cluster add-ons on.
	KlusterletAddonConfig = Kind{Group: "agent.open-cluster-management.io", Version: "v1", Kind: "KlusterletAddonConfig",
		Resource: "klusterletaddonconfigs", Namespaced: true}
	// Policy is a configuration policy on the hub, and its copies in the
	// clusters' namespaces.
	Policy = Kind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy",
		Resource: "policies", Namespaced: true}
	// PlacementBinding ties a Policy to its Placement.
	PlacementBinding = Kind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "PlacementBinding",
		Resource: "placementbindings", Namespaced: true}
)

// The kinds of Hive: on the cluster that provisioned a syncset-hive hub, and
// on a hub that makes capacity pools' clusters.
var (
	// SyncSet carries a registration's objects to the hub.
	SyncSet = Kind{Group: "hive.openshift.io", Version: "v1", Kind: "SyncSet", Resource: "syncsets", Namespaced: true}
	// ClusterDeployment is the hub as Hive provisioned it; its SyncSets
	// live in its namespace.
	ClusterDeployment = Kind{Group: "hive.openshift.io", Version: "v1", Kind: "ClusterDeployment",
		Resource: "clusterdeployments", Namespaced: true}
	// ClusterSync records what Hive applied of each SyncSet.
	ClusterSync = Kind{Group: "hiveinternal.openshift.io", Version: "v1alpha1", Kind: "ClusterSync",
		Resource: "clustersyncs", Namespaced: true}
	// MachinePool is a pool cluster's worker nodes, named <cluster>-<pool>.
	MachinePool = Kind{Group: "hive.openshift.io", Version: "v1", Kind: "MachinePool", Resource: "machinepools", Namespaced: true}
	// ClusterImageSet names the release a pool cluster installs.
	ClusterImageSet = Kind{Group: "hive.openshift.io", Version: "v1", Kind: "ClusterImageSet", Resource: "clusterimagesets"}
	// ManifestWork puts a pool's add-ons on its joined clusters.
	ManifestWork = Kind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork", Resource: "manifestworks",
		Namespaced: true}
)

// All returns every kind declared above, for the checks that hold them to
// the hub's CRDs and the domain's kinds to them.
func All() []Kind {
	return []Kind{
		Namespace, Secret, CustomResourceDefinition,
		ManagedCluster, ManagedClusterInfo, ManagedClusterSet, ManagedClusterSetBinding,
		Placement, PlacementDecision, KlusterletAddonConfig, Policy, PlacementBinding,
		SyncSet, ClusterDeployment, ClusterSync, MachinePool, ClusterImageSet, ManifestWork,
	}
}

// GVR returns the kind's group, version and resource, what the dynamic
// client reaches its objects by.
func (k Kind) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}

// GVK returns the kind's group, version and kind.
func (k Kind) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// APIVersion returns the apiVersion of the kind's objects: "v1" for the
// core group, "<group>/<version>" otherwise.
func (k Kind) APIVersion() string {
	return schema.GroupVersion{Group: k.Group, Version: k.Version}.String()
}

// New returns an object of the kind with its apiVersion, kind and name set,
// and its namespace when not empty.
func (k Kind) New(namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k.APIVersion(), "kind": k.Kind}}
	obj.SetName(name)
	if namespace != "" {
		obj.SetNamespace(namespace)
	}
	return obj
}

// Is reports whether obj is of the kind, at the kind's version.
func (k Kind) Is(obj *unstructured.Unstructured) bool {
	return obj.GetAPIVersion() == k.APIVersion() && obj.GetKind() == k.Kind
}
