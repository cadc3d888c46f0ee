package hubtest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

var (
	crdResource            = hubkind.CustomResourceDefinition.GVR()
	managedClusters        = hubkind.ManagedCluster.GVR()
	klusterletAddonConfigs = hubkind.KlusterletAddonConfig.GVR()
)

func TestMain(m *testing.M) { hubtest.Main(m) }

func TestStartIsShared(t *testing.T) {
	if a, b := hubtest.Start(t), hubtest.Start(t); a != b {
		t.Errorf("Start() = %p, then %p, want the same hub", a, b)
	}
}

func TestCRDsAreEstablished(t *testing.T) {
	t.Parallel()
	hub := hubtest.Start(t)
	list, err := hubtest.Dynamic(t).Resource(crdResource).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("List(CRDs) error = %v", err)
	}
	established := map[string]bool{}
	for _, crd := range list.Items {
		established[crd.GetName()] = hasCondition(crd, "Established", "True")
	}
	want := hub.CRDs()
	for _, name := range []string{
		"managedclusters.cluster.open-cluster-management.io",
		"klusterletaddonconfigs.agent.open-cluster-management.io",
		"manifestworks.work.open-cluster-management.io",
		"policies.policy.open-cluster-management.io",
		"syncsets.hive.openshift.io",
		"clusterdeployments.hive.openshift.io",
	} {
		if !slices.Contains(want, name) {
			t.Errorf("CRDs() = %v, want it to hold %s", want, name)
		}
	}
	for _, name := range want {
		if !established[name] {
			t.Errorf("CRD %s: listed %v, want listed and Established", name, established[name])
		}
	}
}

func TestManagedClusterStatusRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters := hubtest.Dynamic(t).Resource(managedClusters)
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1",
		"kind":       "ManagedCluster",
		"metadata":   map[string]any{"name": "status-round-trip"},
		"spec":       map[string]any{"hubAcceptsClient": true},
	}}
	created, err := clusters.Create(ctx, cluster, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create(ManagedCluster) error = %v", err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	conditions := []any{}
	for _, c := range []string{"HubAcceptedManagedCluster", "ManagedClusterJoined", "ManagedClusterConditionAvailable"} {
		conditions = append(conditions, map[string]any{
			"type": c, "status": "True", "reason": c, "message": "set by the test", "lastTransitionTime": now,
		})
	}
	if err := unstructured.SetNestedSlice(created.Object, conditions, "status", "conditions"); err != nil {
		t.Fatalf("SetNestedSlice(conditions) error = %v", err)
	}
	if err := unstructured.SetNestedStringMap(created.Object, map[string]string{"cpu": "8", "memory": "32Gi", "pods": "250"}, "status", "capacity"); err != nil {
		t.Fatalf("SetNestedStringMap(capacity) error = %v", err)
	}
	if _, err := clusters.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateStatus(ManagedCluster) error = %v", err)
	}

	got, err := clusters.Get(ctx, "status-round-trip", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get(ManagedCluster) error = %v", err)
	}
	for _, c := range []string{"HubAcceptedManagedCluster", "ManagedClusterJoined", "ManagedClusterConditionAvailable"} {
		if !hasCondition(*got, c, "True") {
			t.Errorf("Get(ManagedCluster) status.conditions = %v, want %s True", got.Object["status"], c)
		}
	}
	if pods, _, _ := unstructured.NestedString(got.Object, "status", "capacity", "pods"); pods != "250" {
		t.Errorf("status.capacity.pods = %q, want 250 (unknown capacity keys are kept)", pods)
	}
	if accepts, _, _ := unstructured.NestedBool(got.Object, "spec", "hubAcceptsClient"); !accepts {
		t.Errorf("spec.hubAcceptsClient = false, want true")
	}
}

func TestKlusterletAddonConfigInClusterNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := hubtest.Start(t)
	const name = "addon-config-cluster"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := hub.NewClientsetFor(t).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create(Namespace %s) error = %v", name, err)
	}
	enabled := map[string]any{"enabled": true}
	config := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agent.open-cluster-management.io/v1",
		"kind":       "KlusterletAddonConfig",
		"metadata":   map[string]any{"name": name, "namespace": name},
		"spec": map[string]any{
			"clusterName": name, "clusterNamespace": name,
			"applicationManager": enabled, "certPolicyController": enabled,
			"policyController": enabled, "searchCollector": map[string]any{"enabled": false},
		},
	}}
	configs := hub.NewDynamicFor(t).Resource(klusterletAddonConfigs).Namespace(name)
	if _, err := configs.Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create(KlusterletAddonConfig) error = %v", err)
	}
	got, err := configs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get(KlusterletAddonConfig) error = %v", err)
	}
	if clusterName, _, _ := unstructured.NestedString(got.Object, "spec", "clusterName"); clusterName != name {
		t.Errorf("spec.clusterName = %q, want %q", clusterName, name)
	}

	// The CRD schema is enforced: the required addons cannot be left out.
	invalid := config.DeepCopy()
	invalid.SetName("incomplete")
	unstructured.RemoveNestedField(invalid.Object, "spec", "searchCollector")
	if _, err := configs.Create(ctx, invalid, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("Create(KlusterletAddonConfig without searchCollector) error = %v, want Invalid", err)
	}
}

func TestServerSideApplyManagedCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters := hubtest.Dynamic(t).Resource(managedClusters)
	desired := func(env string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.open-cluster-management.io/v1",
			"kind":       "ManagedCluster",
			"metadata":   map[string]any{"name": "applied", "labels": map[string]any{"env": env}},
			"spec":       map[string]any{"hubAcceptsClient": true},
		}}
	}

	applied, err := clusters.Apply(ctx, "applied", desired("test"), metav1.ApplyOptions{FieldManager: "fleet-manager"})
	if err != nil {
		t.Fatalf("Apply(ManagedCluster) error = %v", err)
	}
	if got := applied.GetLabels()["env"]; got != "test" {
		t.Errorf("Apply(ManagedCluster) labels[env] = %q, want test", got)
	}
	if !managedBy(applied, "fleet-manager") {
		t.Errorf("Apply(ManagedCluster) managedFields = %v, want an Apply entry of fleet-manager", applied.GetManagedFields())
	}

	// Applying again is idempotent.
	again, err := clusters.Apply(ctx, "applied", desired("test"), metav1.ApplyOptions{FieldManager: "fleet-manager"})
	if err != nil || again.GetResourceVersion() != applied.GetResourceVersion() {
		t.Errorf("Apply(same ManagedCluster) = resourceVersion %s, error %v; want %s, nil", again.GetResourceVersion(), err, applied.GetResourceVersion())
	}

	// Another manager changing the field conflicts unless it forces.
	_, err = clusters.Apply(ctx, "applied", desired("prod"), metav1.ApplyOptions{FieldManager: "someone-else"})
	if !apierrors.IsConflict(err) {
		t.Errorf("Apply(labels[env]=prod, someone-else) error = %v, want Conflict", err)
	}
	forced, err := clusters.Apply(ctx, "applied", desired("prod"), metav1.ApplyOptions{FieldManager: "someone-else", Force: true})
	if err != nil {
		t.Fatalf("Apply(labels[env]=prod, someone-else, Force) error = %v", err)
	}
	if got := forced.GetLabels()["env"]; got != "prod" {
		t.Errorf("Apply(Force) labels[env] = %q, want prod", got)
	}
}

func TestKubeconfigReachesTheHub(t *testing.T) {
	t.Parallel()
	path := hubtest.Start(t).Kubeconfig(t)
	config, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("BuildConfigFromFlags(%s) error = %v", path, err)
	}
	if config.Insecure || len(config.CAData) == 0 {
		t.Errorf("kubeconfig insecure %v, %d bytes of CA, want the serving CA", config.Insecure, len(config.CAData))
	}
	clients, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig error = %v", err)
	}
	version, err := clients.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("ServerVersion() error = %v", err)
	}
	if version.GitVersion == "" {
		t.Errorf("ServerVersion() = %+v, want a version", version)
	}
	t.Logf("hub serves Kubernetes %s", version.GitVersion)
}

// hasCondition reports whether obj has the condition condType with status.
func hasCondition(obj unstructured.Unstructured, condType, status string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if cond, ok := c.(map[string]any); ok && cond["type"] == condType {
			return cond["status"] == status
		}
	}
	return false
}

// managedBy reports whether manager owns fields of obj through Apply.
func managedBy(obj *unstructured.Unstructured, manager string) bool {
	for _, entry := range obj.GetManagedFields() {
		if entry.Manager == manager && entry.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
