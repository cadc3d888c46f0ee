package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// syncUnderTest is a kindSync of any kind, as the engine tests drive it.
type syncUnderTest struct {
	fullResync     func(context.Context) error
	runIncremental func(context.Context)
	queue          *batcher
	store          cache.Store
	batches        *prometheus.CounterVec
	// reportSize is the length of the JSON report of an object.
	reportSize func(*unstructured.Unstructured) int
}

func underTest[T any](t *testing.T, s *kindSync[T]) syncUnderTest {
	return syncUnderTest{fullResync: s.fullResync, runIncremental: s.runIncremental, queue: s.queue,
		store: s.informer.GetStore(), batches: s.batches,
		reportSize: func(u *unstructured.Unstructured) int { r, _ := s.report.item(u); return len(mustJSON(t, r)) }}
}

// sentBatch is a batch the fake fleet manager stored, whatever its endpoint.
type sentBatch struct {
	full, last                bool
	generation                int64
	upserts, present, deletes []string
}

// syncedKind is one kind the engine serves, with what the tests need to
// know of it.
type syncedKind struct {
	name string
	// op is the fake fleet manager's operation of the kind's endpoint.
	op string
	// start returns the kind's sync reporting to f in batches of size, its
	// store holding an object of each name.
	start func(t *testing.T, f *fakeFleet, size int, names ...string) syncUnderTest
	// object is the object name at step, a label that moves its content hash.
	object func(t *testing.T, name, step string) *unstructured.Unstructured
	// key is name's key in the store and the batches.
	key func(name string) string
	// sent returns the kind's batches f stored, in order.
	sent func(f *fakeFleet) []sentBatch
}

// engineDelay is the incremental batches' delay in the engine tests.
const engineDelay = 20 * time.Millisecond

// syncedKinds are ManagedClusters, with their summary, presence by name and
// inventory endpoint, and Placements, one kind of the registry.
var syncedKinds = []syncedKind{
	{
		name: "ManagedCluster", op: "postHubInventory",
		start: func(t *testing.T, f *fakeFleet, size int, names ...string) syncUnderTest {
			inv, _ := newTestInventory(t, f, size, engineDelay, names...)
			return underTest(t, inv)
		},
		object: func(t *testing.T, name, step string) *unstructured.Unstructured {
			return managedCluster(t, name, map[string]string{"name": name, "step": step}, `{"capacity": {"cpu": "4"}}`)
		},
		key: func(name string) string { return name },
		sent: func(f *fakeFleet) []sentBatch {
			var out []sentBatch
			for _, b := range f.inventoryBatches() {
				s := sentBatch{full: b.Full, last: b.Last, generation: b.Generation, deletes: b.Deletes}
				s.upserts, _ = upserted([]private.InventoryBatch{b})
				if b.Present != nil {
					for _, p := range *b.Present {
						s.present = append(s.present, p.Name)
					}
				}
				out = append(out, s)
			}
			return out
		},
	},
	{
		name: "Placement", op: "postHubResources",
		start: func(t *testing.T, f *fakeFleet, size int, names ...string) syncUnderTest {
			fc, _ := newTestFleetClient(t, f, DefaultConfig())
			objects := make([]*unstructured.Unstructured, len(names))
			for i, n := range names {
				objects[i] = placement(n, "1")
			}
			return underTest(t, newPlacementSync(t, fc, size, engineDelay, objects...))
		},
		object: func(_ *testing.T, name, step string) *unstructured.Unstructured { return placement(name, step) },
		key:    func(name string) string { return "ns/" + name },
		sent: func(f *fakeFleet) []sentBatch {
			var out []sentBatch
			for _, b := range f.resourceBatches() {
				s := sentBatch{full: b.Full, last: b.Last, generation: b.Generation, deletes: b.Deletes}
				s.upserts, s.present, _ = keysOf([]private.ResourceBatch{b})
				out = append(out, s)
			}
			return out
		},
	},
}

// keys returns the keys of names in kind k.
func (k syncedKind) keys(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = k.key(n)
	}
	return out
}

// onlyOwnEndpoint fails t when f got batches on another endpoint than k's.
func (k syncedKind) onlyOwnEndpoint(t *testing.T, f *fakeFleet) {
	t.Helper()
	if all, own := len(f.inventoryBatches())+len(f.resourceBatches()), len(k.sent(f)); all != own {
		t.Errorf("%d batches in all, %d on the %s endpoint, want every one there", all, own, k.op)
	}
}

// TestOneEngineResyncsByHash: for every kind, a second resync sends the
// acknowledged unchanged objects by key and hash, the changed one in full,
// and one the fleet manager lost follows in an incremental batch.
func TestOneEngineResyncsByHash(t *testing.T) {
	t.Parallel()
	for _, k := range syncedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeFleet(t)
			s := k.start(t, f, 10, "a", "b", "c")
			if err := s.fullResync(t.Context()); err != nil {
				t.Fatalf("fullResync() = %v", err)
			}
			if err := s.store.Update(k.object(t, "b", "2")); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			f.forget = map[string]bool{k.key("c"): true}
			f.mu.Unlock()
			if err := s.fullResync(t.Context()); err != nil {
				t.Fatalf("second fullResync() = %v", err)
			}
			sent := k.sent(f)
			if len(sent) != 3 {
				t.Fatalf("two resyncs sent %d batches, want 3: %+v", len(sent), sent)
			}
			if b := sent[0]; !b.full || !b.last || b.generation != 1_001 || !slices.Equal(b.upserts, k.keys("a", "b", "c")) || b.present != nil {
				t.Errorf("first resync = %+v, want full, last, generation 1001, every object in full", b)
			}
			if b := sent[1]; !b.full || !b.last || b.generation != 1_002 || !slices.Equal(b.upserts, k.keys("b")) || !slices.Equal(b.present, k.keys("a", "c")) {
				t.Errorf("second resync = %+v, want full, last, generation 1002, b in full, a and c by hash", b)
			}
			if b := sent[2]; b.full || !slices.Equal(b.upserts, k.keys("c")) {
				t.Errorf("after the second resync = %+v, want an incremental batch with c, which the fleet manager lost", b)
			}
			k.onlyOwnEndpoint(t, f)
			if got := testutil.ToFloat64(s.batches.WithLabelValues(batchFull, outcomeSuccess)); got != 2 {
				t.Errorf("full batches counted = %v, want 2", got)
			}
			if got := testutil.ToFloat64(s.batches.WithLabelValues(batchIncremental, outcomeSuccess)); got != 1 {
				t.Errorf("incremental batches counted = %v, want 1", got)
			}
		})
	}
}

// TestOneEngineSplitsAndRetries: for every kind, a resync batch refused as
// too large is halved until its halves pass, every object stored once and
// only the final batch last; a resync batch that fails is sent again.
func TestOneEngineSplitsAndRetries(t *testing.T) {
	t.Parallel()
	for _, k := range syncedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeFleet(t)
			names := make([]string, 8)
			for i := range names {
				names[i] = fmt.Sprintf("c%d", i)
			}
			s := k.start(t, f, 8, names...)
			// Room for about two reports per request: the batch of eight is halved down.
			f.limitBody(2*s.reportSize(k.object(t, "c0", "1")) + 200)
			if err := s.fullResync(t.Context()); err != nil {
				t.Fatalf("fullResync() = %v", err)
			}
			sent := k.sent(f)
			var up []string
			lasts := 0
			for i, b := range sent {
				up = append(up, b.upserts...)
				if b.last {
					lasts++
					if i != len(sent)-1 {
						t.Errorf("batch %d of %d is last, want only the final one", i, len(sent))
					}
				}
			}
			if !slices.Equal(up, k.keys(names...)) {
				t.Errorf("objects stored = %v, want %v once each", up, k.keys(names...))
			}
			if lasts != 1 || len(sent) < 4 {
				t.Errorf("%d stored batches, %d last; want at least 4 (split) and exactly 1 last", len(sent), lasts)
			}
			if got := testutil.ToFloat64(s.batches.WithLabelValues(batchFull, outcomeRejected)); got == 0 {
				t.Errorf("refused full batches counted = %v, want some", got)
			}

			// Every object acknowledged: the next resync is one batch of
			// presences, which fails once and passes on its retry.
			f.limitBody(0)
			f.failNext(k.op, 1)
			if err := s.fullResync(t.Context()); err != nil {
				t.Fatalf("second fullResync() = %v", err)
			}
			sent = k.sent(f)
			if b := sent[len(sent)-1]; !b.full || !b.last || len(b.upserts) != 0 || !slices.Equal(b.present, k.keys(names...)) {
				t.Errorf("retried resync batch = %+v, want full, last, every object by hash", b)
			}
			if got := testutil.ToFloat64(s.batches.WithLabelValues(batchFull, outcomeError)); got != 1 {
				t.Errorf("failed full batches counted = %v, want 1", got)
			}
			k.onlyOwnEndpoint(t, f)
		})
	}
}

// TestOneEngineKeepsTheRestOfARefusedObjectsBatch: for every kind, when the
// one changed object of a resync is refused on its own, it is dropped and
// the rest of its batch (the unchanged objects by hash, the last mark) is
// still sent, so the resync ends.
func TestOneEngineKeepsTheRestOfARefusedObjectsBatch(t *testing.T) {
	t.Parallel()
	for _, k := range syncedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeFleet(t)
			s := k.start(t, f, 10, "a", "b", "c")
			if err := s.fullResync(t.Context()); err != nil {
				t.Fatalf("fullResync() = %v", err)
			}
			huge := k.object(t, "b", strings.Repeat("x", 4096))
			if err := s.store.Update(huge); err != nil {
				t.Fatal(err)
			}
			// Room for the presences, not for b's report.
			f.limitBody(s.reportSize(huge) - 1)
			if err := s.fullResync(t.Context()); err != nil {
				t.Fatalf("second fullResync() = %v", err)
			}
			sent := k.sent(f)
			if len(sent) != 2 {
				t.Fatalf("two resyncs stored %d batches, want 2: %+v", len(sent), sent)
			}
			if b := sent[1]; !b.full || !b.last || b.generation != 1_002 || len(b.upserts) != 0 || !slices.Equal(b.present, k.keys("a", "c")) {
				t.Errorf("second resync = %+v, want full, last, generation 1002, a and c by hash, b dropped", b)
			}
			if got := testutil.ToFloat64(s.batches.WithLabelValues(batchFull, outcomeRejected)); got != 1 {
				t.Errorf("refused full batches counted = %v, want 1", got)
			}
		})
	}
}

// TestOneEngineRequeuesFailedBatches: for every kind, an incremental batch
// that fails goes back into the queue and is sent again with the object's
// latest state; a deleted object goes by key.
func TestOneEngineRequeuesFailedBatches(t *testing.T) {
	t.Parallel()
	for _, k := range syncedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			f := newFakeFleet(t)
			s := k.start(t, f, 10, "a", "b")
			go s.runIncremental(t.Context())

			f.failNext(k.op, 1)
			if err := s.store.Update(k.object(t, "a", "2")); err != nil {
				t.Fatal(err)
			}
			s.queue.add(k.key("a"))
			g.Eventually(func() []sentBatch { return k.sent(f) }).WithTimeout(10 * time.Second).Should(gomega.HaveLen(1))
			if b := k.sent(f)[0]; b.full || b.generation != 1_000 || !slices.Equal(b.upserts, k.keys("a")) {
				t.Errorf("batch after the failure = %+v, want incremental, generation 1000, a", b)
			}
			if got := testutil.ToFloat64(s.batches.WithLabelValues(batchIncremental, outcomeError)); got != 1 {
				t.Errorf("failed incremental batches counted = %v, want 1", got)
			}

			if err := s.store.Delete(k.object(t, "b", "1")); err != nil {
				t.Fatal(err)
			}
			s.queue.add(k.key("b"))
			g.Eventually(func() []sentBatch { return k.sent(f) }).WithTimeout(5 * time.Second).Should(gomega.HaveLen(2))
			if b := k.sent(f)[1]; !slices.Equal(b.deletes, k.keys("b")) || len(b.upserts) != 0 {
				t.Errorf("batch after the deletion = %+v, want b deleted, nothing upserted", b)
			}
			k.onlyOwnEndpoint(t, f)
		})
	}
}
