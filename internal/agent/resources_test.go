package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// resourceFleet records the resource batches it is sent and acknowledges
// each upsert with its content hash; a batch of more than maxUpserts upserts
// is refused as too large.
type resourceFleet struct {
	mu         sync.Mutex
	batches    []private.ResourceBatch
	maxUpserts int
}

func (f *resourceFleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b private.ResourceBatch
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.maxUpserts > 0 && len(b.Upserts) > f.maxUpserts {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = w.Write([]byte(`{"kind":"Error","id":"11","href":"/errors/11","code":"T-11","reason":"too large"}`))
		return
	}
	f.batches = append(f.batches, b)
	ack := private.InventoryAck{Kind: private.InventoryAckKindInventoryAck, ContentHashes: map[string]string{}, Resend: []string{}}
	for _, u := range b.Upserts {
		ack.ContentHashes[agentapi.Object(u).Key()] = fleet.ResourceContentHash(u.Body)
	}
	_ = json.NewEncoder(w).Encode(ack)
}

func (f *resourceFleet) sent() []private.ResourceBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func placement(name, step string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
		"metadata": map[string]any{"namespace": "ns", "name": name, "uid": "uid-" + name, "resourceVersion": step,
			"labels": map[string]any{"step": step}},
	}}
}

// newTestKindSync returns a Placement sync reporting to f, whose informer's
// store holds objects (the informer is not run).
func newTestKindSync(t *testing.T, f *resourceFleet, objects ...*unstructured.Unstructured) *kindSync[private.ResourceObject] {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	fc, err := NewFleetClient(srv.URL, "hub-1", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return newPlacementSync(t, fc, 2, time.Second, objects...)
}

// newPlacementSync returns a Placement sync reporting through fc in batches
// of size, whose informer's store holds objects (the informer is not run).
func newPlacementSync(t *testing.T, fc *FleetClient, size int, delay time.Duration, objects ...*unstructured.Unstructured) *kindSync[private.ResourceObject] {
	t.Helper()
	gvr := hubkind.Placement.GVR()
	dyn := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "PlacementList"})
	informer := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, "", 0, cache.Indexers{}, nil).Informer()
	for _, o := range objects {
		if err := informer.GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	kind := private.ResourceKind{Group: gvr.Group, Version: gvr.Version, Kind: "Placement", Resource: gvr.Resource, Namespaced: true}
	ks := &kindSync[private.ResourceObject]{
		what: "resource", report: resourceReport{kind: kind, fleet: fc}, informer: informer, queue: newBatcher(size, delay, time.Now), size: size,
		batches: newTestMetrics(t).resourceBatches.MustCurryWith(prometheus.Labels{"resource": kind.Resource}),
		logger:  testLogger(), live: &liveness{}, clock: wallClock{}, acked: map[string]string{},
	}
	ks.generation.Store(1_000)
	return ks
}

func keysOf(batches []private.ResourceBatch) (upserts, present, deletes []string) {
	for _, b := range batches {
		for _, u := range b.Upserts {
			upserts = append(upserts, agentapi.Object(u).Key())
		}
		if b.Present != nil {
			for _, p := range *b.Present {
				present = append(present, p.Key)
			}
		}
		deletes = append(deletes, b.Deletes...)
	}
	return upserts, present, deletes
}

// TestKindSyncFullResync: a resync sends every object under one new
// generation, the last batch marked; the next sends the acknowledged ones by
// key and hash, and a changed one in full.
func TestKindSyncFullResync(t *testing.T) {
	t.Parallel()
	f := &resourceFleet{}
	ks := newTestKindSync(t, f, placement("c", "1"), placement("a", "1"), placement("b", "1"))
	if err := ks.fullResync(t.Context()); err != nil {
		t.Fatalf("fullResync() = %v", err)
	}
	first := f.sent()
	if len(first) != 2 {
		t.Fatalf("fullResync(3 objects, size 2): %d batches, want 2", len(first))
	}
	for i, b := range first {
		if !b.Full || b.Generation != 1_001 || b.Last != (i == 1) || b.Kind != "Placement" || b.Group != "cluster.open-cluster-management.io" {
			t.Errorf("batch %d = %+v; want a full Placement batch of generation 1001, last only at the end", i, b)
		}
	}
	if up, _, _ := keysOf(first); !slices.Equal(up, []string{"ns/a", "ns/b", "ns/c"}) {
		t.Errorf("first resync upserts = %v, want ns/a, ns/b, ns/c", up)
	}

	// A new resourceVersion alone changes nothing; a new label does.
	if err := ks.informer.GetStore().Update(placement("b", "2")); err != nil {
		t.Fatal(err)
	}
	a := placement("a", "1")
	a.SetResourceVersion("7")
	if err := ks.informer.GetStore().Update(a); err != nil {
		t.Fatal(err)
	}
	if err := ks.fullResync(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := f.sent()[2:]
	up, present, _ := keysOf(second)
	if !slices.Equal(up, []string{"ns/b"}) || !slices.Equal(present, []string{"ns/a", "ns/c"}) || second[0].Generation != 1_002 {
		t.Errorf("second resync = upserts %v, present %v, generation %d; want ns/b, [ns/a ns/c], 1002", up, present, second[0].Generation)
	}
}

// TestKindSyncIncremental: keys of objects the store no longer has are
// deletes; unchanged acknowledged objects are not sent; a refused batch is
// halved.
func TestKindSyncIncremental(t *testing.T) {
	t.Parallel()
	f := &resourceFleet{maxUpserts: 1}
	ks := newTestKindSync(t, f, placement("a", "1"), placement("b", "1"))
	if err := ks.sendKeys(t.Context(), []string{"ns/a", "ns/b", "ns/gone"}); err != nil {
		t.Fatalf("sendKeys() = %v", err)
	}
	up, _, del := keysOf(f.sent())
	if !slices.Equal(up, []string{"ns/a", "ns/b"}) || !slices.Equal(del, []string{"ns/gone"}) || len(f.sent()) != 2 {
		t.Errorf("sendKeys() sent %d batches, upserts %v, deletes %v; want 2 halves, ns/a and ns/b, ns/gone", len(f.sent()), up, del)
	}
	if err := ks.sendKeys(t.Context(), []string{"ns/a", "ns/b"}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.sent()); n != 2 {
		t.Errorf("sendKeys(unchanged) sent %d more batches, want none", n-2)
	}
}
