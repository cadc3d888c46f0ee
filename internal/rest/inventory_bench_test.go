package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// BenchmarkManagedClusterPage is the fleet manager's own work for one page of
// 100 managed clusters, `GET {base}/managed_clusters?size=100` as a
// fleet-admin: authentication, the store's queries on the real PostgreSQL,
// presenting and encoding the answer. The clusters look as fleetshard-sync
// reports them (5 labels, 8 claims, capacity, allocatable, 3 conditions), as
// in cmd/fleet-bench. The handler is called in process, so the figures leave
// out the network; cpu-ms/op is comparable with the "fm CPU/req" of
// `make bench/reads`.
func BenchmarkManagedClusterPage(b *testing.B) {
	e := newStackEnvWith(b, flavours()[0], postgres.DefaultStoreConfig())
	hub := e.createAgentHub(b, "bench-hub", "eu", 1000)
	batch := private.InventoryBatch{Generation: 1, Deletes: []string{}}
	for i := range 100 {
		batch.Upserts = append(batch.Upserts, benchClusterSummary(i))
	}
	resp, err := e.agent.PostHubInventoryWithResponse(context.Background(), hub.Id, batch, agentAuth(e.agentToken(b, *hub.AgentIdentity)))
	if err != nil || resp.JSON200 == nil || resp.JSON200.Written != 100 {
		b.Fatalf("PostHubInventory() = %s; want 100 written", outcome(resp, err))
	}
	handler, token := e.server.Config.Handler, e.adminToken(b)
	b.ReportAllocs()
	var size int
	cpu := processCPU(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, e.base+"/managed_clusters?size=100", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /managed_clusters?size=100 = %d: %s", rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// processCPU is the user and system CPU the test process has used, which is
// the fleet manager's side of a request and its garbage collection (the
// database runs in its own processes).
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// benchClusterSummary is cluster i as fleetshard-sync summarizes a real
// OpenShift ManagedCluster.
func benchClusterSummary(i int) private.ManagedClusterSummary {
	name := fmt.Sprintf("cluster-%05d", i)
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	version, kube, rv := "4.16.12", "v1.29.8+f10c92d", fmt.Sprint(1000000+i)
	console := "https://console-openshift-console.apps." + name + ".bench.example.com"
	labels := map[string]string{"cloud": "Amazon", "vendor": "OpenShift", "name": name, "env": "prod",
		"cluster.open-cluster-management.io/clusterset": "default"}
	claims := map[string]string{"id.openshift.io": id, "version.openshift.io": version,
		"platform.open-cluster-management.io": "AWS", "product.open-cluster-management.io": "OpenShift",
		"region.open-cluster-management.io": "us-east-1", "consoleurl.cluster.open-cluster-management.io": console,
		"kubeversion.open-cluster-management.io": kube, "name": name}
	capacity := map[string]string{"cpu": "24", "memory": "98765432Ki", "pods": "750", "core_worker": "24", "socket_worker": "3"}
	allocatable := map[string]string{"cpu": "23500m", "memory": "95432100Ki", "pods": "750", "core_worker": "24", "socket_worker": "3"}
	at := time.Date(2026, 1, 10, 8, 0, 0, 0, time.UTC)
	cond := func(t, reason, message string) private.ClusterCondition {
		return private.ClusterCondition{Type: t, Status: "True", Reason: &reason, Message: &message, LastTransitionTime: &at}
	}
	conditions := []private.ClusterCondition{
		cond("HubAcceptedManagedCluster", "HubClusterAdminAccepted", "Accepted by hub cluster admin"),
		cond("ManagedClusterJoined", "ManagedClusterJoined", "Managed cluster joined"),
		cond("ManagedClusterConditionAvailable", "ManagedClusterAvailable", "Managed cluster is available"),
	}
	return private.ManagedClusterSummary{Name: name, Uid: &id, ResourceVersion: &rv, Labels: &labels, Claims: &claims,
		Capacity: &capacity, Allocatable: &allocatable, Conditions: &conditions, KubernetesVersion: &kube}
}
