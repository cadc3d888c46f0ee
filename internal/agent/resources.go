package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// kindSync reports one kind of the fleet manager's registry from its
// informer's store, as inventory does for ManagedClusters: changed keys are
// coalesced by a batcher into incremental batches, a full resync sends them
// all under a new generation, and an object whose content hash the fleet
// manager acknowledged goes in a resync by key and hash only. One kindSync
// serves every kind; nothing in it is particular to one.
type kindSync struct {
	kind     private.ResourceKind
	fleet    *FleetClient
	informer cache.SharedIndexInformer
	queue    *batcher
	size     int
	metrics  *Metrics
	logger   *slog.Logger
	live     *liveness
	clock    fleet.Clock

	generation atomic.Int64
	sendMu     sync.Mutex
	// acked is, by key, the content hash the fleet manager acknowledged.
	// Guarded by sendMu.
	acked map[string]string
}

// runResources asks the fleet manager which kinds to sync (retrying until
// it answers or ctx ends), then syncs each with its own informer until ctx
// ends.
func (a *Agent) runResources(ctx context.Context) {
	var kinds []private.ResourceKind
	b := newBackoff()
	for {
		var err error
		if kinds, err = a.fleet.GetHubResourceKinds(ctx); err == nil {
			break
		}
		a.logger.Warn("the kinds to sync were not fetched, will retry", "error", err)
		if !sleep(ctx, b.next()) {
			return
		}
	}
	var wg sync.WaitGroup
	for _, k := range kinds {
		ks := a.newKindSync(k)
		wg.Go(func() { ks.run(ctx, a.cfg.ResyncInterval) })
	}
	wg.Wait()
}

// newKindSync returns the sync of kind k, its informer not yet started.
func (a *Agent) newKindSync(k private.ResourceKind) *kindSync {
	gvr := schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
	informer := dynamicinformer.NewFilteredDynamicInformer(a.hub.Dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	ks := &kindSync{
		kind: k, fleet: a.fleet, informer: informer, size: a.cfg.InventoryBatchSize, metrics: a.metrics,
		logger: a.logger.With("component", "resources", "resource", k.Resource), live: &a.live, clock: a.clock,
		queue: newBatcher(a.cfg.InventoryBatchSize, a.cfg.InventoryBatchDelay, func() time.Time { return a.clock.Now() }),
		acked: map[string]string{},
	}
	ks.generation.Store(a.startGeneration)
	return ks
}

// run runs the informer and, once it synced, the full resyncs (now and
// every interval) and the incremental batches, until ctx ends.
func (ks *kindSync) run(ctx context.Context, interval time.Duration) {
	if err := dropManagedFields(ks.informer); err != nil {
		ks.logger.Error("informer transform not set", "error", err)
		return
	}
	if _, err := ks.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial { // the initial list is the start resync's
				ks.changed(obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetResourceVersion() != n.GetResourceVersion() {
				ks.changed(newObj)
			}
		},
		DeleteFunc: ks.changed,
	}); err != nil {
		ks.logger.Error("informer handler not added", "error", err)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { ks.informer.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), ks.informer.HasSynced) {
		ks.logger.Info("informer synced", "objects", len(ks.informer.GetStore().ListKeys()))
		wg.Go(func() { ks.runResync(ctx, interval) })
		wg.Go(func() { ks.queue.drain(ctx, ks.logger, ks.kind.Kind+" batch", ks.sendKeys) })
	}
	wg.Wait()
}

func (ks *kindSync) changed(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		ks.queue.add(key)
	}
}

// runResync sends a full resync now and every interval until ctx ends.
func (ks *kindSync) runResync(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ks.fullResync(ctx) != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// resourceObject is the report of one object, and its content hash. The body
// goes through JSON, so that the hash is computed on what the fleet
// manager decodes.
func resourceObject(u *unstructured.Unstructured) (private.ResourceObject, string) {
	var body map[string]any
	b, _ := json.Marshal(u.Object) // an object decoded from the API server always marshals
	_ = json.Unmarshal(b, &body)
	ns, uid, rv, gen, labels := u.GetNamespace(), string(u.GetUID()), u.GetResourceVersion(), u.GetGeneration(), u.GetLabels()
	o := private.ResourceObject{Name: u.GetName(), Uid: &uid, ResourceVersion: &rv, Generation: &gen, Body: body}
	if ns != "" {
		o.Namespace = &ns
	}
	if labels != nil {
		o.Labels = &labels
	}
	return o, fleet.ResourceContentHash(body)
}

// sendKeys sends the current state of the objects of keys: those the hub
// has and whose content changed since acknowledged, and the deletes.
func (ks *kindSync) sendKeys(ctx context.Context, keys []string) error {
	ks.sendMu.Lock()
	defer ks.sendMu.Unlock()
	return ks.sendKeysLocked(ctx, keys)
}

func (ks *kindSync) sendKeysLocked(ctx context.Context, keys []string) error {
	batch := ks.newBatch(false, false)
	for _, key := range keys {
		obj, exists, err := ks.informer.GetStore().GetByKey(key)
		if err != nil {
			return err
		}
		if u, ok := obj.(*unstructured.Unstructured); exists && ok {
			if o, h := resourceObject(u); ks.acked[key] != h {
				batch.Upserts = append(batch.Upserts, o)
			}
		} else {
			batch.Deletes = append(batch.Deletes, key)
		}
	}
	if len(batch.Upserts) == 0 && len(batch.Deletes) == 0 {
		return nil
	}
	_, err := ks.send(ctx, batchIncremental, batch)
	return err
}

func (ks *kindSync) newBatch(full, last bool) private.ResourceBatch {
	return private.ResourceBatch{Group: ks.kind.Group, Kind: ks.kind.Kind, Generation: ks.generation.Load(), Full: full, Last: last,
		Upserts: []private.ResourceObject{}, Deletes: []string{}}
}

// fullResync sends every object of the store in batches of a new
// generation, the last one marked last, retrying each until it passes or
// ctx ends; then the objects the fleet manager asked for again.
func (ks *kindSync) fullResync(ctx context.Context) error {
	ks.sendMu.Lock()
	defer ks.sendMu.Unlock()
	ks.generation.Add(1)
	keys := ks.informer.GetStore().ListKeys()
	slices.Sort(keys)
	chunks := slices.Collect(slices.Chunk(keys, ks.size))
	if len(chunks) == 0 {
		chunks = [][]string{{}}
	}
	var resend []string
	for i, chunk := range chunks {
		batch := ks.resyncBatch(chunk, i == len(chunks)-1)
		again, err := ks.sendRetrying(ctx, batch)
		if err != nil {
			return err
		}
		resend = append(resend, again...)
	}
	ks.logger.Info("full resync sent", "generation", ks.generation.Load(), "objects", len(keys), "batches", len(chunks), "resent", len(resend))
	for keys := range slices.Chunk(resend, ks.size) {
		if err := ks.sendKeysLocked(ctx, keys); err != nil {
			return err
		}
	}
	return nil
}

// resyncBatch is one batch of a full resync: an object unchanged since
// acknowledged goes by key and hash.
func (ks *kindSync) resyncBatch(keys []string, last bool) private.ResourceBatch {
	batch := ks.newBatch(true, last)
	var present []private.PresentObject
	for _, key := range keys {
		obj, exists, _ := ks.informer.GetStore().GetByKey(key)
		u, ok := obj.(*unstructured.Unstructured)
		if !exists || !ok {
			continue
		}
		o, h := resourceObject(u)
		if ks.acked[key] == h {
			present = append(present, private.PresentObject{Key: key, ContentHash: h})
			continue
		}
		batch.Upserts = append(batch.Upserts, o)
	}
	if len(present) > 0 {
		batch.Present = &present
	}
	return batch
}

// sendRetrying sends one batch of a resync until it passes or ctx ends.
func (ks *kindSync) sendRetrying(ctx context.Context, batch private.ResourceBatch) ([]string, error) {
	b := newBackoff()
	for {
		resend, err := ks.send(ctx, batchFull, batch)
		if err == nil {
			return resend, nil
		}
		ks.logger.Warn("full resync batch not sent, will retry", "error", err, "generation", batch.Generation)
		if !sleep(ctx, b.next()) {
			return nil, ctx.Err()
		}
	}
}

// send posts batch. A batch refused as too large or malformed is halved, down
// to single objects, which are dropped (and logged) when refused alone.
func (ks *kindSync) send(ctx context.Context, mode string, batch private.ResourceBatch) ([]string, error) {
	ack, err := ks.fleet.PostHubResources(ctx, batch)
	ks.metrics.resourceBatches.WithLabelValues(ks.kind.Resource, mode, outcome(err)).Inc()
	if err == nil {
		ks.live.fleetOK(ks.clock.Now())
		ks.remember(batch, ack)
		return ack.Resend, nil
	}
	if !splittable(err) {
		return nil, err
	}
	if len(batch.Upserts)+len(batch.Deletes) <= 1 {
		ks.logger.Error("batch refused, dropped", "error", err, "upserts", len(batch.Upserts), "deletes", batch.Deletes)
		return nil, nil
	}
	first, second := batch, batch
	first.Last, second.Present = false, nil
	if len(batch.Upserts) > 1 || len(batch.Deletes) == 0 {
		h := len(batch.Upserts) / 2
		first.Upserts, first.Deletes, second.Upserts = batch.Upserts[:h], []string{}, batch.Upserts[h:]
	} else {
		h := len(batch.Deletes) / 2
		first.Deletes, second.Upserts, second.Deletes = batch.Deletes[:h], []private.ResourceObject{}, batch.Deletes[h:]
	}
	resend, err := ks.send(ctx, mode, first)
	if err != nil {
		return nil, err
	}
	more, err := ks.send(ctx, mode, second)
	return append(resend, more...), err
}

// remember records the hashes the fleet manager stored, and forgets the
// deleted objects and those it asked for again.
func (ks *kindSync) remember(batch private.ResourceBatch, ack private.InventoryAck) {
	maps.Copy(ks.acked, ack.ContentHashes)
	for _, key := range batch.Deletes {
		delete(ks.acked, key)
	}
	for _, key := range ack.Resend {
		delete(ks.acked, key)
	}
}

// dropManagedFields has informer drop the managed fields of every object it
// stores: the agent never reads them, and a hub of thousands of clusters would
// keep them all in memory. It fails once the informer has started.
func dropManagedFields(informer cache.SharedIndexInformer) error {
	return informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	})
}
