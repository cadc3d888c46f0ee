package agent

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// Kinds of batch, the values of the kind label.
const (
	batchFull        = "full"
	batchIncremental = "incremental"
)

// kindReport is what the sync of one kind does its own way: how an object of
// the hub is reported, and which endpoint of the fleet manager takes the
// batches. Everything else is kindSync's, the same for every kind.
type kindReport[T any] interface {
	// item returns the report of u and its content hash, as the fleet
	// manager computes it.
	item(u *unstructured.Unstructured) (T, string)
	// post sends b in its endpoint's shape and returns the acknowledgement.
	post(ctx context.Context, b syncBatch[T]) (private.InventoryAck, error)
}

// syncBatch is one batch of a kind before it takes its endpoint's shape.
type syncBatch[T any] struct {
	generation int64
	full, last bool
	upserts    []syncItem[T]
	// present holds the objects unchanged since acknowledged, by key and hash.
	present []private.PresentObject
	deletes []string
}

// syncItem is the report of one object, with its key for the logs.
type syncItem[T any] struct {
	key    string
	report T
}

// kindHooks are what a kind adds to its sync besides its report; each may be
// left out.
type kindHooks struct {
	// changed is told each object the informer reports added, changed or
	// deleted, once its key is queued.
	changed func(key string, u *unstructured.Unstructured)
	// synced runs beside the sync's loops once the informer synced.
	synced func(ctx context.Context)
	// resync asks for a full resync besides the interval's.
	resync <-chan struct{}
}

// kindSync reports one kind of hub object from its informer's store, the
// same way for ManagedClusters and every kind of the registry: changed keys
// are coalesced by a batcher into incremental batches; a full resync sends
// them all under a new generation, an object whose content hash the fleet
// manager acknowledged by key and hash only. Both read the store when they
// send, so a batch carries an object's latest state, and they never
// interleave, so a resync never sends an older state after a newer change.
type kindSync[T any] struct {
	// what names the kind's batches in the log messages.
	what     string
	report   kindReport[T]
	hooks    kindHooks
	informer cache.SharedIndexInformer
	queue    *batcher
	size     int
	// batches counts the batches sent, by kind of batch and outcome.
	batches *prometheus.CounterVec
	logger  *slog.Logger
	live    *liveness
	clock   fleet.Clock

	// generation is the last full resync's; it starts at the agent's start
	// time, so a restarted agent's generations are new.
	generation atomic.Int64
	sendMu     sync.Mutex
	// acked is, by key, the content hash the fleet manager acknowledged.
	// Guarded by sendMu; empty at start, so the first resync after a restart
	// sends everything.
	acked map[string]string
}

// newKindSync returns the sync of informer's kind for a, its informer not
// yet watched; what names its batches in the logs.
func newKindSync[T any](a *Agent, what string, informer cache.SharedIndexInformer, report kindReport[T], batches *prometheus.CounterVec, logger *slog.Logger, hooks kindHooks) *kindSync[T] {
	s := &kindSync[T]{
		what: what, report: report, hooks: hooks, informer: informer, size: a.cfg.InventoryBatchSize, batches: batches,
		logger: logger, live: &a.live, clock: a.clock, acked: map[string]string{},
		queue: newBatcher(a.cfg.InventoryBatchSize, a.cfg.InventoryBatchDelay, func() time.Time { return a.clock.Now() }),
	}
	s.generation.Store(a.startGeneration)
	return s
}

// watch has the informer drop managed fields and queue every change; it
// fails once the informer has started.
func (s *kindSync[T]) watch() error {
	if err := dropManagedFields(s.informer); err != nil {
		return err
	}
	_, err := s.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial { // the initial list is the start resync's
				s.changed(obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetResourceVersion() != n.GetResourceVersion() {
				s.changed(newObj)
			}
		},
		DeleteFunc: s.changed,
	})
	return err
}

// changed queues an object that was added, changed or deleted.
func (s *kindSync[T]) changed(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.queue.add(key)
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && s.hooks.changed != nil {
		s.hooks.changed(key, u)
	}
}

// run runs the informer and, once it synced, the kind's synced hook, the
// full resyncs and the incremental batches, until ctx ends.
func (s *kindSync[T]) run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	wg.Go(func() { s.informer.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		s.logger.Info(s.what+" informer synced", "objects", len(s.informer.GetStore().ListKeys()))
		if s.hooks.synced != nil {
			wg.Go(func() { s.hooks.synced(ctx) })
		}
		wg.Go(func() { s.runResync(ctx, interval) })
		wg.Go(func() { s.runIncremental(ctx) })
	}
	wg.Wait()
}

// runIncremental sends the queued changes until ctx ends.
func (s *kindSync[T]) runIncremental(ctx context.Context) {
	s.queue.drain(ctx, s.logger, s.what+" batch", s.sendKeys)
}

// runResync sends a full resync now, then every interval and whenever the
// hooks ask, until ctx ends. Requests made while a resync ran are answered
// by it.
func (s *kindSync[T]) runResync(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if s.fullResync(ctx) != nil {
			return
		}
		select {
		case <-s.hooks.resync:
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.hooks.resync:
		}
	}
}

// sendKeys sends the current state of the objects of keys: those the hub
// has and whose content changed since acknowledged, and the deletes.
func (s *kindSync[T]) sendKeys(ctx context.Context, keys []string) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.sendKeysLocked(ctx, keys)
}

func (s *kindSync[T]) sendKeysLocked(ctx context.Context, keys []string) error {
	batch := syncBatch[T]{generation: s.generation.Load()}
	for _, key := range keys {
		obj, exists, err := s.informer.GetStore().GetByKey(key)
		if err != nil {
			return err
		}
		if u, ok := obj.(*unstructured.Unstructured); exists && ok {
			// A change the fleet manager does not keep (a resourceVersion) is not sent.
			if r, h := s.report.item(u); s.acked[key] != h {
				batch.upserts = append(batch.upserts, syncItem[T]{key: key, report: r})
			}
		} else {
			batch.deletes = append(batch.deletes, key)
		}
	}
	if len(batch.upserts) == 0 && len(batch.deletes) == 0 {
		return nil
	}
	_, err := s.send(ctx, batchIncremental, batch)
	return err
}

// fullResync sends every object of the store, sorted by key, in batches of
// one new generation, the last one marked last (an empty one when the store
// is empty), retrying each batch until it passes or ctx ends; then, in
// full, the objects the fleet manager asked for again.
func (s *kindSync[T]) fullResync(ctx context.Context) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	gen := s.generation.Add(1)
	keys := s.informer.GetStore().ListKeys()
	slices.Sort(keys)
	chunks := slices.Collect(slices.Chunk(keys, s.size))
	if len(chunks) == 0 {
		chunks = [][]string{{}}
	}
	var resend []string
	for i, chunk := range chunks {
		batch := s.resyncBatch(gen, chunk, i == len(chunks)-1)
		again, err := s.sendRetrying(ctx, batch, i, len(chunks))
		if err != nil {
			return err
		}
		resend = append(resend, again...)
	}
	s.logger.Info("full "+s.what+" resync sent", "generation", gen, "objects", len(keys), "batches", len(chunks), "resent", len(resend))
	for keys := range slices.Chunk(resend, s.size) {
		if err := s.sendKeysLocked(ctx, keys); err != nil {
			return err
		}
	}
	return nil
}

// resyncBatch is one batch of a full resync: an object unchanged since
// acknowledged goes by key and hash, the others in full.
func (s *kindSync[T]) resyncBatch(gen int64, keys []string, last bool) syncBatch[T] {
	batch := syncBatch[T]{generation: gen, full: true, last: last}
	for _, key := range keys {
		obj, exists, _ := s.informer.GetStore().GetByKey(key)
		u, ok := obj.(*unstructured.Unstructured)
		if !exists || !ok {
			continue
		}
		r, h := s.report.item(u)
		if s.acked[key] == h {
			batch.present = append(batch.present, private.PresentObject{Key: key, ContentHash: h})
			continue
		}
		batch.upserts = append(batch.upserts, syncItem[T]{key: key, report: r})
	}
	return batch
}

// sendRetrying sends batch i of the n of a resync until it passes or ctx
// ends, and returns the keys the fleet manager wants again in full.
func (s *kindSync[T]) sendRetrying(ctx context.Context, batch syncBatch[T], i, n int) ([]string, error) {
	b := newBackoff()
	for {
		resend, err := s.send(ctx, batchFull, batch)
		if err == nil {
			return resend, nil
		}
		s.logger.Warn("full "+s.what+" batch not sent, will retry", "error", err, "generation", batch.generation, "batch", i+1, "of", n)
		if !sleep(ctx, b.after(err)) {
			return nil, ctx.Err()
		}
	}
}

// send posts batch. A batch refused as too large or malformed is halved and
// each half sent, down to single objects: one refused on its own is dropped
// (and logged) while the rest of its batch goes on, so one odd object does
// not stop the others. Other errors are returned, for the caller to retry.
func (s *kindSync[T]) send(ctx context.Context, mode string, batch syncBatch[T]) ([]string, error) {
	ack, err := s.report.post(ctx, batch)
	s.batches.WithLabelValues(mode, outcome(err)).Inc()
	if err == nil {
		s.live.fleetOK(s.clock.Now())
		s.remember(batch, ack)
		return ack.Resend, nil
	}
	if !splittable(err) {
		return nil, err
	}
	if len(batch.upserts)+len(batch.deletes) <= 1 {
		s.logger.Error(s.what+" batch refused, dropped", "error", err, "upserts", itemKeys(batch.upserts), "deletes", batch.deletes)
		// What the batch carried besides the refused object (presences, the
		// resync's last mark) still goes, or a resync would never end.
		rest := batch
		rest.upserts, rest.deletes = nil, nil
		if len(batch.upserts)+len(batch.deletes) == 0 || (len(rest.present) == 0 && !rest.last) {
			return nil, nil
		}
		return s.send(ctx, mode, rest)
	}
	first, second := batch.split()
	resend, err := s.send(ctx, mode, first)
	if err != nil {
		return nil, err
	}
	more, err := s.send(ctx, mode, second)
	return append(resend, more...), err
}

// remember records the hashes the fleet manager stored, and forgets the
// deleted objects and those it asked for again.
func (s *kindSync[T]) remember(batch syncBatch[T], ack private.InventoryAck) {
	maps.Copy(s.acked, ack.ContentHashes)
	for _, key := range batch.deletes {
		delete(s.acked, key)
	}
	for _, key := range ack.Resend {
		delete(s.acked, key)
	}
}

// split halves a batch; only the second half keeps its last mark, only the
// first its present objects.
func (b syncBatch[T]) split() (syncBatch[T], syncBatch[T]) {
	first, second := b, b
	first.last, second.present = false, nil
	if len(b.upserts) > 1 || len(b.deletes) == 0 {
		h := len(b.upserts) / 2
		first.upserts, first.deletes, second.upserts = b.upserts[:h], nil, b.upserts[h:]
	} else {
		h := len(b.deletes) / 2
		first.deletes, second.upserts, second.deletes = b.deletes[:h], nil, b.deletes[h:]
	}
	return first, second
}

// reports returns the reports of items, an empty list for none.
func reports[T any](items []syncItem[T]) []T {
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = it.report
	}
	return out
}

func itemKeys[T any](items []syncItem[T]) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.key
	}
	return out
}

// orEmpty returns s, or an empty list for nil: the private API wants lists.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// splittable reports whether err refuses the batch itself, so that halves may pass.
func splittable(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Status == 400 || se.Status == 413)
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
