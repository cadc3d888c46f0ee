package ocmtest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

func TestMain(m *testing.M) { ocmtest.Main(m) }

// joinTimeout bounds each wait on OCM's programs: a managed cluster's
// first certificate, status and lease take a few of the agents' periods on
// a busy machine.
const joinTimeout = 3 * time.Minute

var clusterClaims = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1alpha1", Resource: "clusterclaims"}

// TestRealRegistrationAndWork joins a managed cluster to the hub through
// OCM's own registration agent and controller, then delivers ManifestWorks
// through OCM's work agent: nothing in it is played by this project but the
// CSR approval and signing that ocmtest's package comment names.
func TestRealRegistrationAndWork(t *testing.T) {
	ocm := ocmtest.Start(t)
	hub := ocm.Hub()
	hubDyn := hub.NewDynamicFor(t)
	hubKube := hub.NewClientsetFor(t)
	name := "ocmtest-" + randomSuffix(t)
	ctx := t.Context()

	// Accepted up front, as RHACM's import is asked to by a ManagedCluster
	// with hubAcceptsClient true (what Fleet Manager creates).
	mc := hubkind.ManagedCluster.New("", name)
	mc.SetLabels(map[string]string{"fleet-test": name})
	if err := unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(mc.Object, int64(60), "spec", "leaseDurationSeconds"); err != nil {
		t.Fatal(err)
	}
	if _, err := hubDyn.Resource(hubkind.ManagedCluster.GVR()).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ManagedCluster: %v", err)
	}

	cluster := ocm.Join(t, name)
	managedKube, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	managedDyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// What the agent reports comes from the managed cluster: a cluster
	// claim, as a cluster's id.k8s.io, and a node's capacity.
	clusterID := "id-" + name
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
		"metadata": map[string]any{"name": "id.k8s.io"},
		"spec":     map[string]any{"value": clusterID},
	}}
	if _, err := managedDyn.Resource(clusterClaims).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterClaim: %v", err)
	}
	node, err := managedKube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Node: %v", err)
	}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3500m"), corev1.ResourceMemory: resource.MustParse("15Gi")}
	if _, err := managedKube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update Node status: %v", err)
	}
	managedVersion, err := managedKube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}

	joined := t.Run("Joined", func(t *testing.T) {
		var status clusterStatus
		waitFor(t, ocm, cluster, "the ManagedCluster accepted, joined and available with the agent's claims", func() error {
			got, err := hubDyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			status = clusterStatus{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &status); err != nil {
				return err
			}
			for _, c := range []string{"HubAcceptedManagedCluster", "ManagedClusterJoined", "ManagedClusterConditionAvailable"} {
				if !meta.IsStatusConditionTrue(status.Status.Conditions, c) {
					return fmt.Errorf("condition %s not True in %+v", c, status.Status.Conditions)
				}
			}
			if !slices.Contains(status.Status.ClusterClaims, claimStatus{Name: "id.k8s.io", Value: clusterID}) {
				return fmt.Errorf("cluster claims %+v lack id.k8s.io", status.Status.ClusterClaims)
			}
			if cpu := status.Status.Capacity["cpu"]; cpu.Cmp(resource.MustParse("4")) != 0 {
				return fmt.Errorf("capacity %v, want the node's 4 CPUs", status.Status.Capacity)
			}
			return nil
		})
		if got := meta.FindStatusCondition(status.Status.Conditions, "HubAcceptedManagedCluster"); got.Reason != "HubClusterAdminAccepted" {
			t.Errorf("HubAcceptedManagedCluster reason %q, want the registration controller's HubClusterAdminAccepted", got.Reason)
		}
		if status.Status.Version.Kubernetes != managedVersion.GitVersion {
			t.Errorf("status.version.kubernetes %q, want the managed cluster's %q", status.Status.Version.Kubernetes, managedVersion.GitVersion)
		}
		if got := status.Status.Allocatable["cpu"]; got.Cmp(resource.MustParse("3500m")) != 0 {
			t.Errorf("allocatable %v, want the node's 3500m CPUs", status.Status.Allocatable)
		}
		if !slices.Contains(status.Finalizers, "cluster.open-cluster-management.io/api-resource-cleanup") {
			t.Errorf("finalizers %v lack the registration controller's api-resource-cleanup", status.Finalizers)
		}

		// The hub's lease of the cluster is the agent's heartbeat.
		var lease *coordinationv1.Lease
		waitFor(t, ocm, cluster, "the agent's lease on the hub", func() error {
			lease, err = hubKube.CoordinationV1().Leases(name).Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.RenewTime == nil {
				return fmt.Errorf("lease never renewed")
			}
			return nil
		})
		if age := time.Since(lease.Spec.RenewTime.Time); age > 2*time.Minute {
			t.Errorf("lease renewed %s ago, want a live heartbeat", age)
		}
	})

	if !joined {
		t.FailNow() // no work agent without a joined cluster
	}

	t.Run("ManifestWorkApplied", func(t *testing.T) {
		work := manifestWork(name, "ocmtest-config", map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "ocmtest-config", "namespace": "default"},
			"data":     map[string]any{"colour": "blue"},
		})
		if _, err := hubDyn.Resource(hubkind.ManifestWork.GVR()).Namespace(name).Create(ctx, work, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ManifestWork: %v", err)
		}
		waitFor(t, ocm, cluster, "the ConfigMap on the managed cluster", func() error {
			cm, err := managedKube.CoreV1().ConfigMaps("default").Get(ctx, "ocmtest-config", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["colour"] != "blue" {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		})
		waitFor(t, ocm, cluster, "the ManifestWork Applied and Available", func() error {
			status, err := workStatus(ctx, hubDyn, name, "ocmtest-config")
			if err != nil {
				return err
			}
			for _, c := range []string{"Applied", "Available"} {
				if !meta.IsStatusConditionTrue(status.Conditions, c) {
					return fmt.Errorf("condition %s not True in %+v", c, status.Conditions)
				}
			}
			if n := len(status.ResourceStatus.Manifests); n != 1 {
				return fmt.Errorf("%d manifest statuses, want 1", n)
			}
			m := status.ResourceStatus.Manifests[0]
			if m.ResourceMeta.Kind != "ConfigMap" || m.ResourceMeta.Name != "ocmtest-config" ||
				!meta.IsStatusConditionTrue(m.Conditions, "Applied") || !meta.IsStatusConditionTrue(m.Conditions, "Available") {
				return fmt.Errorf("manifest status %+v", m)
			}
			return nil
		})
	})

	t.Run("ManifestRefusedByManagedCluster", func(t *testing.T) {
		// The hub takes any object in a ManifestWork; a ConfigMap key with
		// a space is refused by the managed cluster's API server alone.
		work := manifestWork(name, "ocmtest-refused", map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "ocmtest-refused", "namespace": "default"},
			"data":     map[string]any{"not a key": "x"},
		})
		if _, err := hubDyn.Resource(hubkind.ManifestWork.GVR()).Namespace(name).Create(ctx, work, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ManifestWork: %v", err)
		}
		var status manifestWorkStatus
		waitFor(t, ocm, cluster, "the ManifestWork reported not applied", func() error {
			var err error
			if status, err = workStatus(ctx, hubDyn, name, "ocmtest-refused"); err != nil {
				return err
			}
			applied := meta.FindStatusCondition(status.Conditions, "Applied")
			if applied == nil || applied.Status != metav1.ConditionFalse {
				return fmt.Errorf("Applied condition %+v, want False", applied)
			}
			if len(status.ResourceStatus.Manifests) != 1 {
				return fmt.Errorf("manifest statuses %+v", status.ResourceStatus.Manifests)
			}
			return nil
		})
		m := status.ResourceStatus.Manifests[0]
		applied := meta.FindStatusCondition(m.Conditions, "Applied")
		if applied == nil || applied.Status != metav1.ConditionFalse || !strings.Contains(applied.Message, "is invalid") {
			t.Errorf("manifest Applied condition %+v, want False with the API server's refusal", applied)
		}
		if _, err := managedKube.CoreV1().ConfigMaps("default").Get(ctx, "ocmtest-refused", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused ConfigMap on the managed cluster: %v", err)
		}
	})
}

// waitFor polls check until it passes, failing the test at joinTimeout or
// as soon as one of OCM's programs has exited.
func waitFor(t *testing.T, ocm *ocmtest.Hub, cluster *ocmtest.Cluster, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(joinTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if exited := cmpErr(ocm.Err(), cluster.Err()); exited != nil {
			t.Fatalf("waiting for %s: %v", what, exited)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", joinTimeout, what, err)
		}
		<-tick.C
	}
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func manifestWork(namespace, name string, manifests ...map[string]any) *unstructured.Unstructured {
	w := hubkind.ManifestWork.New(namespace, name)
	list := make([]any, len(manifests))
	for i, m := range manifests {
		list[i] = m
	}
	w.Object["spec"] = map[string]any{"workload": map[string]any{"manifests": list}}
	return w
}

func workStatus(ctx context.Context, dyn dynamic.Interface, namespace, name string) (manifestWorkStatus, error) {
	got, err := dyn.Resource(hubkind.ManifestWork.GVR()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return manifestWorkStatus{}, err
	}
	var w struct {
		Status manifestWorkStatus `json:"status"`
	}
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &w)
	return w.Status, err
}

// The parts of OCM's ManagedCluster and ManifestWork the test reads, as
// open-cluster-management.io/api names them.
type (
	clusterStatus struct {
		metav1.ObjectMeta `json:"metadata"`
		Status            struct {
			Conditions    []metav1.Condition  `json:"conditions"`
			ClusterClaims []claimStatus       `json:"clusterClaims"`
			Capacity      corev1.ResourceList `json:"capacity"`
			Allocatable   corev1.ResourceList `json:"allocatable"`
			Version       struct {
				Kubernetes string `json:"kubernetes"`
			} `json:"version"`
		} `json:"status"`
	}
	claimStatus struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	manifestWorkStatus struct {
		Conditions     []metav1.Condition `json:"conditions"`
		ResourceStatus struct {
			Manifests []struct {
				ResourceMeta struct {
					Kind      string `json:"kind"`
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"resourceMeta"`
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"manifests"`
		} `json:"resourceStatus"`
	}
)

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
