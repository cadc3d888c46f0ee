package agent

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
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
	// acked is, by name, the content hash the fleet manager acknowledged for
	// each cluster: a full resync reports an unchanged cluster by name and
	// hash only. Guarded by sendMu; empty at start, so the first resync after
	// a restart sends everything.
	acked map[string]string
}

// runIncremental sends the queued changes until ctx ends.
func (inv *inventory) runIncremental(ctx context.Context) {
	inv.queue.drain(ctx, inv.logger, "inventory batch", inv.sendNames)
}

// sendNames sends the current state of the named clusters: a summary of
// each one the hub has, the names of those it no longer has.
func (inv *inventory) sendNames(ctx context.Context, names []string) error {
	inv.sendMu.Lock()
	defer inv.sendMu.Unlock()
	return inv.sendNamesLocked(ctx, names)
}

func (inv *inventory) sendNamesLocked(ctx context.Context, names []string) error {
	batch := private.InventoryBatch{Generation: inv.generation.Load(), Upserts: []private.ManagedClusterSummary{}, Deletes: []string{}}
	for _, name := range names {
		obj, exists, err := inv.store.GetByKey(name)
		if err != nil {
			return err
		}
		if mc, ok := obj.(*unstructured.Unstructured); exists && ok {
			s := summarize(mc)
			// A change the inventory does not keep (a resourceVersion) is not sent.
			if h, ok := inv.acked[name]; !ok || h != agentapi.Summary(s).ContentHash() {
				batch.Upserts = append(batch.Upserts, s)
			}
		} else {
			batch.Deletes = append(batch.Deletes, name)
		}
	}
	if len(batch.Upserts) == 0 && len(batch.Deletes) == 0 {
		return nil
	}
	_, err := inv.send(ctx, batchIncremental, batch)
	return err
}

// fullResync sends every cluster of the store in batches of one new
// generation, the last one marked last (an empty one when the hub has no
// cluster), retrying each batch until it passes or ctx ends. A cluster whose
// content hash the fleet manager acknowledged before goes by name and hash
// only; those it asks for again follow in full.
func (inv *inventory) fullResync(ctx context.Context) error {
	inv.sendMu.Lock()
	defer inv.sendMu.Unlock()
	gen := inv.generation.Add(1)
	summaries := inv.summaries()
	chunks := slices.Collect(slices.Chunk(summaries, inv.size))
	if len(chunks) == 0 {
		chunks = [][]private.ManagedClusterSummary{{}}
	}
	var resend []string
	for i, chunk := range chunks {
		batch := agentapi.ResyncBatch(gen, i == len(chunks)-1, chunk, inv.acked)
		again, err := inv.sendRetrying(ctx, batch, i, len(chunks))
		if err != nil {
			return err
		}
		resend = append(resend, again...)
	}
	inv.logger.Info("full inventory resync sent", "generation", gen, "clusters", len(summaries), "batches", len(chunks), "resent", len(resend))
	for names := range slices.Chunk(resend, inv.size) {
		if err := inv.sendNamesLocked(ctx, names); err != nil {
			return err
		}
	}
	return nil
}

// sendRetrying sends one batch of a resync until it passes or ctx ends, and
// returns the names the fleet manager wants again in full.
func (inv *inventory) sendRetrying(ctx context.Context, batch private.InventoryBatch, i, n int) ([]string, error) {
	b := newBackoff()
	for {
		resend, err := inv.send(ctx, batchFull, batch)
		if err == nil {
			return resend, nil
		}
		inv.logger.Warn("full inventory batch not sent, will retry", "error", err, "generation", batch.Generation, "batch", i+1, "of", n)
		if !sleep(ctx, b.next()) {
			return nil, ctx.Err()
		}
	}
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
func (inv *inventory) send(ctx context.Context, kind string, batch private.InventoryBatch) ([]string, error) {
	ack, err := inv.fleet.PostHubInventory(ctx, batch)
	inv.metrics.inventoryBatches.WithLabelValues(kind, outcome(err)).Inc()
	if err == nil {
		inv.live.fleetOK(inv.clock.Now())
		inv.remember(batch, ack)
		return ack.Resend, nil
	}
	if !splittable(err) {
		return nil, err
	}
	if n := len(batch.Upserts) + len(batch.Deletes); n <= 1 {
		inv.logger.Error("inventory batch refused, dropped", "error", err, "upserts", summaryNames(batch.Upserts), "deletes", batch.Deletes)
		return nil, nil
	}
	first, second := splitBatch(batch)
	resend, err := inv.send(ctx, kind, first)
	if err != nil {
		return nil, err
	}
	more, err := inv.send(ctx, kind, second)
	return append(resend, more...), err
}

// remember records what the fleet manager acknowledged: the hashes it stored,
// and forgets deleted clusters and those it asked for again.
func (inv *inventory) remember(batch private.InventoryBatch, ack private.InventoryAck) {
	if inv.acked == nil {
		inv.acked = map[string]string{}
	}
	maps.Copy(inv.acked, ack.ContentHashes)
	for _, name := range batch.Deletes {
		delete(inv.acked, name)
	}
	for _, name := range ack.Resend {
		delete(inv.acked, name)
	}
}

// splittable reports whether err refuses the batch itself, so that halves may pass.
func splittable(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Status == 400 || se.Status == 413)
}

// splitBatch halves a batch; only the second half keeps its last mark.
func splitBatch(b private.InventoryBatch) (private.InventoryBatch, private.InventoryBatch) {
	first, second := b, b
	first.Last, second.Present = false, nil
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
