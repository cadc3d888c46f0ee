package hivetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// The results of applying a SyncSet, as Hive records them.
const (
	ResultSuccess = "Success"
	ResultFailure = "Failure"
)

// SyncStatus is what a ClusterSync records of one SyncSet (Hive's
// hiveinternal/v1alpha1 SyncStatus).
type SyncStatus struct {
	Name               string `json:"name"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// ResourcesToDelete is what Hive deletes when the SyncSet goes or stops
	// listing it: what it applied while the SyncSet's mode was Sync.
	ResourcesToDelete  []ResourceRef `json:"resourcesToDelete,omitempty"`
	Result             string        `json:"result"`
	FailureMessage     string        `json:"failureMessage,omitempty"`
	LastTransitionTime metav1.Time   `json:"lastTransitionTime"`
	FirstSuccessTime   *metav1.Time  `json:"firstSuccessTime,omitempty"`
}

// ResourceRef names an object a SyncSet put on the target cluster.
type ResourceRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// CreateClusterDeployment creates namespace and in it an installed
// ClusterDeployment name (platform none): where a hub's SyncSets go.
func CreateClusterDeployment(ctx context.Context, t testing.TB, dyn dynamic.Interface, namespace, name string) {
	t.Helper()
	ns := hubkind.Namespace.New("", namespace)
	if _, err := dyn.Resource(hubkind.Namespace.GVR()).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("hivetest: create Namespace %s: %v", namespace, err)
	}
	cd := hubkind.ClusterDeployment.New(namespace, name)
	cd.Object["spec"] = map[string]any{
		"baseDomain": "hive.example.com", "clusterName": name, "installed": true,
		"platform": map[string]any{"none": map[string]any{}},
	}
	if _, err := dyn.Resource(hubkind.ClusterDeployment.GVR()).Namespace(namespace).Create(ctx, cd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("hivetest: create ClusterDeployment %s/%s: %v", namespace, name, err)
	}
}

// ReadSyncStatuses returns what the ClusterSync of a ClusterDeployment
// records of its SyncSets; none when there is no ClusterSync.
func ReadSyncStatuses(ctx context.Context, dyn dynamic.Interface, namespace, clusterDeployment string) ([]SyncStatus, error) {
	cs, err := dyn.Resource(hubkind.ClusterSync.GVR()).Namespace(namespace).Get(ctx, clusterDeployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return statusesOf(cs)
}

// WriteSyncStatuses makes the ClusterSync of a ClusterDeployment record
// statuses, creating it if needed: a test plays a Hive that has not caught
// up yet with it.
func WriteSyncStatuses(ctx context.Context, t testing.TB, dyn dynamic.Interface, namespace, clusterDeployment string, statuses []SyncStatus) {
	t.Helper()
	cs, err := getOrCreateClusterSync(ctx, dyn, namespace, clusterDeployment, nil)
	if err == nil {
		err = setStatuses(cs, statuses)
	}
	if err == nil {
		_, err = dyn.Resource(hubkind.ClusterSync.GVR()).Namespace(namespace).UpdateStatus(ctx, cs, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("hivetest: WriteSyncStatuses(%s/%s): %v", namespace, clusterDeployment, err)
	}
}

// NewRESTMapper maps kinds to resources through the discovery of cfg's API
// server, as Hive's resource helper does for the target cluster.
func NewRESTMapper(t testing.TB, cfg *rest.Config) meta.RESTMapper {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatalf("hivetest: discovery client: %v", err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

// getOrCreateClusterSync returns the ClusterSync named after the
// ClusterDeployment, created (owned by cd when given) if missing.
func getOrCreateClusterSync(ctx context.Context, dyn dynamic.Interface, namespace, name string, cd *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r := dyn.Resource(hubkind.ClusterSync.GVR()).Namespace(namespace)
	cs, err := r.Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return cs, err
	}
	cs = hubkind.ClusterSync.New(namespace, name)
	cs.Object["spec"] = map[string]any{}
	if cd != nil {
		cs.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: cd.GetAPIVersion(), Kind: cd.GetKind(), Name: cd.GetName(), UID: cd.GetUID()}})
	}
	return r.Create(ctx, cs, metav1.CreateOptions{})
}

// statusesOf decodes status.syncSets of a ClusterSync.
func statusesOf(cs *unstructured.Unstructured) ([]SyncStatus, error) {
	raw, found, _ := unstructured.NestedFieldNoCopy(cs.Object, "status", "syncSets")
	if !found {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var statuses []SyncStatus
	if err := json.Unmarshal(b, &statuses); err != nil {
		return nil, fmt.Errorf("ClusterSync %s/%s status.syncSets: %w", cs.GetNamespace(), cs.GetName(), err)
	}
	return statuses, nil
}

// setStatuses writes status.syncSets of a ClusterSync, keeping the rest.
func setStatuses(cs *unstructured.Unstructured, statuses []SyncStatus) error {
	if len(statuses) == 0 {
		unstructured.RemoveNestedField(cs.Object, "status", "syncSets")
		return nil
	}
	b, err := json.Marshal(statuses)
	if err != nil {
		return err
	}
	var raw []any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(cs.Object, raw, "status", "syncSets")
}
