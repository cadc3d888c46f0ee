package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/rest/apitest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/internal/stack"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// sampleObjects returns, for each synced kind, an object of it in namespace
// ns (ignored for cluster-scoped kinds) named name, valid for the hub's CRD.
// A kind added to the registry without a sample fails the round trip.
func sampleObjects(ns, name string) map[string]map[string]any {
	meta := func(namespaced bool) map[string]any {
		m := map[string]any{"name": name, "labels": map[string]any{"step": "1"}}
		if namespaced {
			m["namespace"] = ns
		}
		return m
	}
	return map[string]map[string]any{
		"ManagedClusterInfo": {"apiVersion": "internal.open-cluster-management.io/v1beta1", "kind": "ManagedClusterInfo",
			"metadata": meta(true), "spec": map[string]any{"masterEndpoint": "https://api.example.com:6443"}},
		"ManagedClusterSet": {"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
			"metadata": meta(false), "spec": map[string]any{"clusterSelector": map[string]any{"selectorType": "ExclusiveClusterSetLabel"}}},
		"Placement": {"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
			"metadata": meta(true), "spec": map[string]any{"clusterSets": []any{"default"}}},
		"PlacementDecision": {"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
			"metadata": meta(true)},
		"ClusterDeployment": {"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment", "metadata": meta(true),
			"spec": map[string]any{"baseDomain": "example.com", "clusterName": name,
				"platform": map[string]any{"aws": map[string]any{"region": "eu-west-1"}}}},
		"MachinePool": {"apiVersion": "hive.openshift.io/v1", "kind": "MachinePool", "metadata": meta(true),
			"spec": map[string]any{"clusterDeploymentRef": map[string]any{"name": name}, "name": "workers", "replicas": int64(2),
				"platform": map[string]any{"aws": map[string]any{"type": "m6i.xlarge", "rootVolume": map[string]any{"size": int64(120), "type": "gp3"}}}}},
		"ManifestWork": {"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork", "metadata": meta(true),
			"spec": map[string]any{"workload": map[string]any{"manifests": []any{
				map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}}}}}},
		"Policy": {"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy", "metadata": meta(true),
			"spec": map[string]any{"disabled": false, "remediationAction": "inform", "policy-templates": []any{}}},
	}
}

// testAuth knows two tokens: the agent's and an administrator's.
type testAuth struct{ agentID string }

func (a testAuth) Authenticate(_ context.Context, token string) (fleet.Identity, error) {
	switch token {
	case "agent":
		return fleet.Identity{Subject: a.agentID, AgentID: a.agentID}, nil
	case "admin":
		return fleet.Identity{Subject: "sre", OrgID: "sre", Username: "sre", Roles: []string{"fleet-viewer"}}, nil
	}
	return fleet.Identity{}, fleet.Errorf(fleet.CodeUnauthenticated, "unknown token")
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

func withBearer(c *http.Client, token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token, next: c.Transport}}
}

// roundTripEnv is the fleet manager (its API server on a fresh database) and
// a hub's agent running against the test hub.
type roundTripEnv struct {
	db    *postgres.DB
	admin *admin.ClientWithResponses
}

func startRoundTripEnv(t *testing.T) *roundTripEnv {
	t.Helper()
	ctx := t.Context()
	db, dbCfg := pgtest.NewMigratedDatabase(t)
	keyring, err := secrets.NewKeyring(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stack.DefaultConfig()
	cfg.DB, cfg.Reconcile.Enabled = dbCfg, false
	agentID := fmt.Sprintf("agent-rt-%x", time.Now().UnixNano())
	svc := startStack(t, cfg, stack.Parts{DB: db, Keyring: keyring, Authenticator: testAuth{agentID: agentID}})
	hubRow, err := svc.Store.CreateHub(ctx, fleet.HubCreate{Name: "hub-rt", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: agentID})
	if err != nil {
		t.Fatalf("CreateHub(): %v", err)
	}
	handler, err := svc.API.Handler()
	if err != nil {
		t.Fatalf("Handler(): %v", err)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	base := ts.URL + cfg.HTTP.BasePath

	e := &roundTripEnv{db: db}
	if e.admin, err = admin.NewClientWithResponses(base,
		admin.WithHTTPClient(withBearer(apitest.ValidatingClient(t, openapi.Specs, openapi.Admin, base), "admin"))); err != nil {
		t.Fatal(err)
	}
	runAgent(t, hubRow.ID, withBearer(apitest.ValidatingClient(t, openapi.Specs, openapi.Private, base), "agent"), base)
	return e
}

// startStack builds the stack serve builds and runs it until t ends.
func startStack(t *testing.T, cfg stack.Config, parts stack.Parts) *stack.Stack {
	t.Helper()
	svc, err := stack.New(t.Context(), cfg, parts)
	if err != nil {
		t.Fatalf("stack.New(): %v", err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatalf("Start(): %v", err)
	}
	t.Cleanup(svc.Stop)
	return svc
}

// runAgent runs the hub's agent on the test hub until the test ends.
func runAgent(t *testing.T, hubID string, doer *http.Client, base string) {
	t.Helper()
	hubCfg, leaseName, leaseNamespace := agent.AgentHubAccount(t)
	hub, err := agent.NewHub(hubCfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.FleetManagerURL, cfg.HubID = base, hubID
	cfg.LeaseName, cfg.LeaseNamespace = leaseName, leaseNamespace
	cfg.PollWait, cfg.HeartbeatInterval, cfg.InventoryBatchDelay = 2*time.Second, time.Second, 50*time.Millisecond
	fc, err := agent.NewFleetClient(base, hubID, doer)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := agent.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(cfg, fc, hub, agent.Options{Version: "v-test", StartGeneration: time.Now().UnixNano(),
		Logger: slog.New(slog.DiscardHandler), Metrics: metrics, Clock: fleet.SystemClock{}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("Run() did not return within 30s of its context ending")
		}
	})
}

// listed returns the labels of the live object kind/ns/name as the admin
// API lists it, or nil when it is not listed.
func (e *roundTripEnv) listed(t *testing.T, kind fleet.ResourceKind, ns, name string) map[string]string {
	t.Helper()
	params := &admin.ListResourcesParams{Kind: kind.Resource, Search: ptr("name = '" + name + "'")}
	if ns != "" {
		params.Namespace = &ns
	}
	resp, err := e.admin.ListResourcesWithResponse(t.Context(), params)
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("ListResources(%s) = %v, %v", kind.Kind, resp.Status(), err)
	}
	if len(resp.JSON200.Items) == 0 {
		return nil
	}
	r := resp.JSON200.Items[0]
	if r.ObjectKind != kind.Kind || r.Zone != "eu" || r.Body["kind"] != kind.Kind {
		t.Errorf("ListResources(%s) item %+v: want kind %s, zone eu, its body", kind.Kind, r, kind.Kind)
	}
	if wantCluster := map[bool]string{true: ns}[kind.ClusterNamespace]; deref(r.ClusterName) != wantCluster {
		t.Errorf("ListResources(%s).cluster_name = %q, want %q", kind.Kind, deref(r.ClusterName), wantCluster)
	}
	return r.Labels
}

// tombstoned reports whether the row of kind/ns/name has a tombstone.
func (e *roundTripEnv) tombstoned(t *testing.T, kind fleet.ResourceKind, ns, name string) bool {
	t.Helper()
	var n int64
	if err := e.db.Gorm.Raw(`SELECT count(*) FROM resources WHERE kind = ? AND namespace = ? AND name = ? AND deleted_at IS NOT NULL`,
		kind.Kind, ns, name).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestEveryKindRoundTripsThroughAHub: for every kind of the generic path, an
// object created on the hub appears in the fleet manager, its change follows,
// and its deletion leaves a tombstone.
func TestEveryKindRoundTripsThroughAHub(t *testing.T) {
	t.Parallel()
	e := startRoundTripEnv(t)
	hubClient := hubtest.Start(t).NewDynamicFor(t)
	suffix := fmt.Sprintf("%x", time.Now().UnixNano())
	ns, name := "rt-"+suffix, "rt-"+suffix
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := hubClient.Resource(hubkind.Namespace.GVR()).Create(t.Context(), nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	samples := sampleObjects(ns, name)
	for _, kind := range fleet.SyncedResourceKinds() {
		t.Run(kind.Kind, func(t *testing.T) {
			t.Parallel()
			sample, ok := samples[kind.Kind]
			if !ok {
				t.Fatalf("no sample object of %s: add one to sampleObjects", kind.Kind)
			}
			roundTrip(t, e, hubClient, kind, &unstructured.Unstructured{Object: sample})
		})
	}
}

// roundTrip creates obj on the hub, changes a label, deletes it, and
// follows each step into the fleet manager.
func roundTrip(t *testing.T, e *roundTripEnv, hubClient dynamic.Interface, kind fleet.ResourceKind, obj *unstructured.Unstructured) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	gvr := schema.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: kind.Resource}
	var client dynamic.ResourceInterface = hubClient.Resource(gvr)
	ns := ""
	if kind.Namespaced {
		ns = obj.GetNamespace()
		client = hubClient.Resource(gvr).Namespace(ns)
	}
	name := obj.GetName()
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create(%s %s/%s) on the hub: %v", kind.Kind, ns, name, err)
	}
	g.Eventually(func() map[string]string { return e.listed(t, kind, ns, name) }, 20*time.Second, 100*time.Millisecond).
		Should(gomega.HaveKeyWithValue("step", "1"), "the created %s in the fleet manager", kind.Kind)

	created.SetLabels(map[string]string{"step": "2"})
	if _, err := client.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Update(%s %s/%s) on the hub: %v", kind.Kind, ns, name, err)
	}
	g.Eventually(func() map[string]string { return e.listed(t, kind, ns, name) }, 20*time.Second, 100*time.Millisecond).
		Should(gomega.HaveKeyWithValue("step", "2"), "the changed %s in the fleet manager", kind.Kind)

	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete(%s %s/%s) on the hub: %v", kind.Kind, ns, name, err)
	}
	g.Eventually(func() bool { return e.tombstoned(t, kind, ns, name) }, 20*time.Second, 100*time.Millisecond).
		Should(gomega.BeTrue(), "the deleted %s's tombstone", kind.Kind)
	if labels := e.listed(t, kind, ns, name); labels != nil {
		t.Errorf("ListResources(%s) after the deletion lists it (labels %v), want not", kind.Kind, labels)
	}
}
