package agent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newTestInventory returns the ManagedCluster sync reporting to f, whose
// informer's store (returned too) holds a cluster of each name; the informer
// is not run.
func newTestInventory(t *testing.T, f *fakeFleet, size int, delay time.Duration, names ...string) (*kindSync[private.ManagedClusterSummary], cache.Store) {
	t.Helper()
	fc, _ := newTestFleetClient(t, f, DefaultConfig())
	informer := dynamicinformer.NewFilteredDynamicInformer(newFakeHub().Dynamic, managedClusterGVR, "", 0, cache.Indexers{}, nil).Informer()
	for _, n := range names {
		if err := informer.GetStore().Add(managedCluster(t, n, map[string]string{"name": n}, `{"capacity": {"cpu": "4"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	inv := &kindSync[private.ManagedClusterSummary]{what: "inventory", report: clusterReport{fleet: fc}, informer: informer, queue: newBatcher(size, delay, time.Now),
		size: size, batches: newTestMetrics(t).inventoryBatches, logger: testLogger(), live: &liveness{}, clock: wallClock{}, acked: map[string]string{}}
	inv.generation.Store(1_000)
	return inv, informer.GetStore()
}

func TestFullResyncBatches(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	inv, _ := newTestInventory(t, f, 2, time.Second, "e", "d", "c", "b", "a")
	if err := inv.fullResync(t.Context()); err != nil {
		t.Fatalf("fullResync() = %v", err)
	}
	batches := f.inventoryBatches()
	if len(batches) != 3 {
		t.Fatalf("fullResync(5 clusters, size 2): %d batches, want 3", len(batches))
	}
	for i, b := range batches {
		if !b.Full || b.Generation != 1_001 || b.Last != (i == 2) || len(b.Deletes) != 0 || len(b.Upserts) > 2 {
			t.Errorf("batch %d = full %v, generation %d, last %v, %d upserts, %d deletes; want full, 1001, last only at the end, at most 2, none",
				i, b.Full, b.Generation, b.Last, len(b.Upserts), len(b.Deletes))
		}
	}
	if up, _ := upserted(batches); !reflect.DeepEqual(up, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("clusters sent = %v, want a..e in order", up)
	}

	// A second resync has a new generation.
	if err := inv.fullResync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.inventoryBatches()[3].Generation; got != 1_002 {
		t.Errorf("second resync generation = %d, want 1002", got)
	}
}

// TestResyncSendsUnchangedClustersByHash: after a first resync, an unchanged
// cluster goes by name and hash only; a changed one in full; and one the
// fleet manager asks for again follows in full.
func TestResyncSendsUnchangedClustersByHash(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	inv, store := newTestInventory(t, f, 10, time.Second, "a", "b", "c")
	if err := inv.fullResync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(managedCluster(t, "b", map[string]string{"name": "b", "changed": "yes"}, `{"capacity": {"cpu": "4"}}`)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.forget = map[string]bool{"c": true}
	f.mu.Unlock()
	if err := inv.fullResync(t.Context()); err != nil {
		t.Fatal(err)
	}
	batches := f.inventoryBatches()
	second := batches[1]
	if up, _ := upserted([]private.InventoryBatch{second}); !reflect.DeepEqual(up, []string{"b"}) || second.Present == nil ||
		len(*second.Present) != 2 || !second.Last {
		t.Fatalf("second resync = upserts %v, present %v; want b in full, a and c by hash", up, second.Present)
	}
	if len(batches) != 3 || batches[2].Full {
		t.Fatalf("after the resync: %d batches, want a third, incremental one for c", len(batches))
	}
	if up, _ := upserted(batches[2:]); !reflect.DeepEqual(up, []string{"c"}) {
		t.Errorf("resent in full = %v, want [c]", up)
	}
}

func TestFullResyncOfEmptyHub(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	inv, _ := newTestInventory(t, f, 500, time.Second)
	if err := inv.fullResync(t.Context()); err != nil {
		t.Fatal(err)
	}
	batches := f.inventoryBatches()
	if len(batches) != 1 || !batches[0].Full || !batches[0].Last || len(batches[0].Upserts) != 0 {
		t.Errorf("fullResync(no cluster) = %+v, want one empty full last batch", batches)
	}
}

func TestFullResyncRetriesAndSplits(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	inv, _ := newTestInventory(t, f, 8, time.Second, names...)
	f.failNext("postHubInventory", 2)
	// Room for about two summaries per request: the batch of 8 is halved down.
	one := len(mustJSON(t, summarize(managedCluster(t, "c0", map[string]string{"name": "c0"}, `{"capacity": {"cpu": "4"}}`))))
	f.limitBody(2*one + 200)
	if err := inv.fullResync(t.Context()); err != nil {
		t.Fatal(err)
	}
	batches := f.inventoryBatches()
	if up, _ := upserted(batches); !reflect.DeepEqual(up, names) {
		t.Errorf("clusters stored = %v, want %v once each", up, names)
	}
	lasts := 0
	for i, b := range batches {
		if b.Last {
			lasts++
			if i != len(batches)-1 {
				t.Errorf("batch %d of %d is last, want only the final one", i, len(batches))
			}
		}
	}
	if lasts != 1 || len(batches) < 4 {
		t.Errorf("%d stored batches, %d last; want at least 4 (split) and exactly 1 last", len(batches), lasts)
	}
}

func TestIncrementalBatches(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	f := newFakeFleet(t)
	inv, store := newTestInventory(t, f, 10, 50*time.Millisecond, "a", "b")
	go inv.runIncremental(t.Context())

	// Changes of one name coalesce; a deleted cluster is sent as a name.
	for range 5 {
		inv.queue.add("a")
	}
	if err := store.Delete(managedCluster(t, "b", nil, "")); err != nil {
		t.Fatal(err)
	}
	inv.queue.add("b")
	g.Eventually(f.inventoryBatches).WithTimeout(5 * time.Second).Should(gomega.HaveLen(1))
	b := f.inventoryBatches()[0]
	if b.Full || b.Last || b.Generation != 1_000 || len(b.Upserts) != 1 || b.Upserts[0].Name != "a" || !reflect.DeepEqual(b.Deletes, []string{"b"}) {
		t.Errorf("incremental batch = %+v, want not full, generation 1000, upsert a, delete b", b)
	}

	// A failed send is retried with the cluster's latest state.
	f.failNext("postHubInventory", 1)
	if err := store.Update(managedCluster(t, "a", map[string]string{"name": "a", "v": "2"}, `{"capacity": {"cpu": "4"}}`)); err != nil {
		t.Fatal(err)
	}
	inv.queue.add("a")
	g.Eventually(f.inventoryBatches).WithTimeout(10 * time.Second).Should(gomega.HaveLen(2))
	if up, _ := upserted(f.inventoryBatches()[1:]); !reflect.DeepEqual(up, []string{"a"}) {
		t.Errorf("retried batch upserts = %v, want [a]", up)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
