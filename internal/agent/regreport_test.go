package agent

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// newFakeHub returns a hub of the client-go fake dynamic client holding objs:
// enough for reads; the tests of applying run against a real API server.
func newFakeHub(objs ...runtime.Object) *Hub {
	lists := map[schema.GroupVersionResource]string{
		managedClusterGVR: "ManagedClusterList", namespaceGVR: "NamespaceList", secretGVR: "SecretList",
		clusterDeploymentGVR: "ClusterDeploymentList", clusterImageSetGVR: "ClusterImageSetList", machinePoolGVR: "MachinePoolList",
	}
	return &Hub{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)}
}

func importSecret(name, manifests string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name + "-import", "namespace": name},
		"data":     map[string]any{"import.yaml": base64.StdEncoding.EncodeToString([]byte(manifests))},
	}}
}

func TestRegReporterSendsChangesOnly(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	fc, _ := newTestFleetClient(t, f, DefaultConfig())
	hub := newFakeHub()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	registered := managedCluster(t, "c1", map[string]string{fleet.LabelRegistrationID: "r-1"}, "")
	for _, obj := range []any{registered, managedCluster(t, "direct", nil, "")} {
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	clock := &fixedClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := &regReporter{fleet: fc, store: store, hub: hub.Dynamic, queue: newBatcher(10, time.Millisecond, time.Now), size: 10,
		metrics: newTestMetrics(t), logger: testLogger(), live: &liveness{}, clock: clock,
		sent: map[string]string{}, noImport: map[string]bool{}}
	ctx := t.Context()

	// At start: every registered cluster, and only those.
	if err := r.report(ctx, []string{"c1", "direct"}); err != nil {
		t.Fatal(err)
	}
	items := f.registrationItems()
	if len(items) != 1 || items[0].RegistrationId != "r-1" || items[0].Import != nil {
		t.Fatalf("first report = %+v, want r-1 without import", items)
	}
	if c := items[0].Conditions[0]; c.Type != ConditionJoined || c.Reason != ReasonNotReported || !c.LastTransitionTime.Equal(clock.t) {
		t.Errorf("first report Joined = %+v, want Unknown HubHasNotReported at now", c)
	}
	if !r.noImport["c1"] {
		t.Errorf("noImport[c1] = false after a report without import material, want true")
	}

	// Nothing changed, time moved: nothing sent.
	clock.t = clock.t.Add(time.Hour)
	if err := r.report(ctx, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.registrationItems()); n != 1 {
		t.Errorf("report of an unchanged registration sent %d items in all, want still 1", n)
	}

	// The import secret appears: sent with its manifests.
	if _, err := hub.Dynamic.Resource(secretGVR).Namespace("c1").Create(ctx, importSecret("c1", "kind: Klusterlet\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.report(ctx, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	it, _ := latestItem(f.registrationItems(), "r-1")
	if it.Import == nil || it.Import.Manifests != "kind: Klusterlet\n" {
		t.Errorf("report after the import secret = %+v, want its manifests", it.Import)
	}
	if r.noImport["c1"] {
		t.Errorf("noImport[c1] = true after import material was sent, want false")
	}

	// A failed send is an error (the loop retries it) and is not remembered.
	registered.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": fleet.HubConditionAvailable, "status": "True", "reason": "ManagedClusterAvailable"}}}
	if err := store.Update(registered); err != nil {
		t.Fatal(err)
	}
	f.failNext("putRegistrationsStatus", 1)
	if err := r.report(ctx, []string{"c1"}); err == nil {
		t.Errorf("report with the fleet manager failing = nil, want an error")
	}
	if err := r.report(ctx, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	it, _ = latestItem(f.registrationItems(), "r-1")
	if c := it.Conditions[1]; c.Type != ConditionAvailable || c.Status != "True" || c.Reason != "ManagedClusterAvailable" {
		t.Errorf("report after the cluster became available: Available = %+v, want True ManagedClusterAvailable", c)
	}
}

func TestRegReporterRun(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	fc, _ := newTestFleetClient(t, f, DefaultConfig())
	hub := newFakeHub()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(managedCluster(t, "c1", map[string]string{fleet.LabelRegistrationID: "r-1"}, "")); err != nil {
		t.Fatal(err)
	}
	r := &regReporter{fleet: fc, store: store, hub: hub.Dynamic, queue: newBatcher(10, 10*time.Millisecond, time.Now), size: 10,
		metrics: newTestMetrics(t), logger: testLogger(), live: &liveness{}, clock: wallClock{},
		sent: map[string]string{}, noImport: map[string]bool{}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx, 50*time.Millisecond, time.Hour) }()
	defer func() { cancel(); <-done }()

	waitFor(t, 5*time.Second, "the start report of r-1", func() bool { _, ok := latestItem(f.registrationItems(), "r-1"); return ok })
	// The import secret has no event: the recheck of registrations without one finds it.
	if _, err := hub.Dynamic.Resource(secretGVR).Namespace("c1").Create(ctx, importSecret("c1", "kind: Klusterlet\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "r-1's import material", func() bool {
		it, _ := latestItem(f.registrationItems(), "r-1")
		return it.Import != nil
	})
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(cond).WithTimeout(timeout).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "waited for %s", what)
}

func TestRegReporterOwnsOnlyItsHub(t *testing.T) {
	t.Parallel()
	r := &regReporter{hubID: "hub-1"}
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{fleet.LabelRegistrationID: "r-1", fleet.LabelHubID: "hub-1"}, true},
		{map[string]string{fleet.LabelRegistrationID: "r-1"}, true}, // applied before hub ids were labelled
		{map[string]string{fleet.LabelRegistrationID: "r-1", fleet.LabelHubID: "hub-2"}, false},
		{map[string]string{fleet.LabelHubID: "hub-1"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := r.registered(managedCluster(t, "c", tt.labels, "")); got != tt.want {
			t.Errorf("registered(labels %v) = %v, want %v", tt.labels, got, tt.want)
		}
	}
}
