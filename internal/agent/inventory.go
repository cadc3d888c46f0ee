package agent

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// Kinds of inventory batch, the values of the kind label.
const (
	batchFull        = "full"
	batchIncremental = "incremental"
)

// inventory reports the hub's ManagedClusters from the informer's store:
// changed names are coalesced into incremental batches, and a full resync
// sends them all. Both read the store when they send, so a batch carries a
// cluster's latest state, and they never interleave, so a resync never
// sends an older state after a newer change.
type inventory struct {
	fleet   *FleetClient
	store   cache.Store
	queue   *batcher
	size    int
	metrics *Metrics
	logger  *slog.Logger
	live    *liveness
	clock   fleet.Clock

	// generation is the last full resync's; it starts at the agent's start
	// time, so a restarted agent's generations are new.
	generation atomic.Int64
	sendMu     sync.Mutex
}

// runIncremental sends the queued changes until ctx ends.
func (inv *inventory) runIncremental(ctx context.Context) {
	b := newBackoff()
	for {
		names := inv.queue.next(ctx)
		if names == nil {
			return
		}
		if err := inv.sendNames(ctx, names); err != nil && ctx.Err() == nil {
			inv.logger.Warn("inventory batch not sent, will retry", "error", err, "clusters", len(names))
			inv.queue.requeue(names)
			if !sleep(ctx, b.next()) {
				return
			}
			continue
		}
		b.reset()
	}
}

// sendNames sends the current state of the named clusters: a summary of
// each one the hub has, the names of those it no longer has.
func (inv *inventory) sendNames(ctx context.Context, names []string) error {
	inv.sendMu.Lock()
	defer inv.sendMu.Unlock()
	batch := private.InventoryBatch{Generation: inv.generation.Load(), Upserts: []private.ManagedClusterSummary{}, Deletes: []string{}}
	for _, name := range names {
		obj, exists, err := inv.store.GetByKey(name)
		if err != nil {
			return err
		}
		if mc, ok := obj.(*unstructured.Unstructured); exists && ok {
			batch.Upserts = append(batch.Upserts, summarize(mc))
		} else {
			batch.Deletes = append(batch.Deletes, name)
		}
	}
	return inv.send(ctx, batchIncremental, batch)
}

// fullResync sends every cluster of the store in batches of one new
// generation, the last one marked last (an empty one when the hub has no
// cluster), retrying each batch until it passes or ctx ends.
func (inv *inventory) fullResync(ctx context.Context) error {
	inv.sendMu.Lock()
	defer inv.sendMu.Unlock()
	gen := inv.generation.Add(1)
	summaries := inv.summaries()
	chunks := slices.Collect(slices.Chunk(summaries, inv.size))
	if len(chunks) == 0 {
		chunks = [][]private.ManagedClusterSummary{{}}
	}
	b := newBackoff()
	for i, chunk := range chunks {
		batch := private.InventoryBatch{Generation: gen, Full: true, Last: i == len(chunks)-1, Upserts: chunk, Deletes: []string{}}
		for {
			err := inv.send(ctx, batchFull, batch)
			if err == nil {
				break
			}
			inv.logger.Warn("full inventory batch not sent, will retry", "error", err, "generation", gen, "batch", i+1, "of", len(chunks))
			if !sleep(ctx, b.next()) {
				return ctx.Err()
			}
		}
		b.reset()
	}
	inv.logger.Info("full inventory resync sent", "generation", gen, "clusters", len(summaries), "batches", len(chunks))
	return nil
}

// summaries returns the summary of every cluster of the store, by name.
func (inv *inventory) summaries() []private.ManagedClusterSummary {
	var out []private.ManagedClusterSummary
	for _, obj := range inv.store.List() {
		if mc, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, summarize(mc))
		}
	}
	slices.SortFunc(out, func(a, b private.ManagedClusterSummary) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// send posts batch. A batch refused as too large or malformed is halved and
// each half sent, down to single clusters: a cluster refused on its own is
// dropped (and logged), so one odd cluster does not stop the others. Other
// errors are returned, for the caller to retry.
func (inv *inventory) send(ctx context.Context, kind string, batch private.InventoryBatch) error {
	_, err := inv.fleet.PostHubInventory(ctx, batch)
	inv.metrics.inventoryBatches.WithLabelValues(kind, outcome(err)).Inc()
	if err == nil {
		inv.live.fleetOK(inv.clock.Now())
		return nil
	}
	if !splittable(err) {
		return err
	}
	if n := len(batch.Upserts) + len(batch.Deletes); n <= 1 {
		inv.logger.Error("inventory batch refused, dropped", "error", err, "upserts", summaryNames(batch.Upserts), "deletes", batch.Deletes)
		return nil
	}
	first, second := splitBatch(batch)
	if err := inv.send(ctx, kind, first); err != nil {
		return err
	}
	return inv.send(ctx, kind, second)
}

// splittable reports whether err refuses the batch itself, so that halves may pass.
func splittable(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Status == 400 || se.Status == 413)
}

// splitBatch halves a batch; only the second half keeps its last mark.
func splitBatch(b private.InventoryBatch) (private.InventoryBatch, private.InventoryBatch) {
	first, second := b, b
	first.Last = false
	if len(b.Upserts) > 1 || len(b.Deletes) == 0 {
		h := len(b.Upserts) / 2
		first.Upserts, first.Deletes = b.Upserts[:h], []string{}
		second.Upserts = b.Upserts[h:]
	} else {
		h := len(b.Deletes) / 2
		first.Upserts, first.Deletes = b.Upserts, b.Deletes[:h]
		second.Upserts, second.Deletes = []private.ManagedClusterSummary{}, b.Deletes[h:]
	}
	return first, second
}

func summaryNames(s []private.ManagedClusterSummary) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.Name
	}
	return out
}

// runResync sends a full resync now, then every interval and whenever one
// is requested, until ctx ends. Requests made while a resync ran are
// answered by it.
func (inv *inventory) runResync(ctx context.Context, interval time.Duration, requests <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if inv.fullResync(ctx) != nil {
			return
		}
		select {
		case <-requests:
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-requests:
		}
	}
}
