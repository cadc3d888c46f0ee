package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// regReporter reports the hub-side status of the registrations on the hub
// (the ManagedClusters carrying a registration id) and their import
// material: each one when it changed, all of them at start. The import
// secret has no event of its own here: a registration still without one is
// looked at again every heartbeat interval, every one every resync interval.
type regReporter struct {
	fleet   *FleetClient
	hubID   string
	store   cache.Store
	hub     dynamic.Interface
	queue   *batcher
	size    int
	metrics *Metrics
	logger  *slog.Logger
	live    *liveness
	clock   fleet.Clock

	mu       sync.Mutex
	sent     map[string]string // cluster name to the hash of what was last sent
	noImport map[string]bool   // clusters last reported without import material
}

// run reports until ctx ends; the store must have synced.
func (r *regReporter) run(ctx context.Context, recheck, resync time.Duration) {
	r.queueAll()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.requeueEvery(ctx, recheck, resync) })
	r.queue.drain(ctx, r.logger, "registration status", r.report)
}

func (r *regReporter) requeueEvery(ctx context.Context, recheck, resync time.Duration) {
	rt, st := time.NewTicker(recheck), time.NewTicker(resync)
	defer rt.Stop()
	defer st.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rt.C:
			r.mu.Lock()
			waiting := slices.Sorted(maps.Keys(r.noImport))
			r.mu.Unlock()
			r.queue.add(waiting...)
		case <-st.C:
			r.queueAll()
		}
	}
}

// queueAll queues every registered cluster of the store.
func (r *regReporter) queueAll() {
	var names []string
	for _, obj := range r.store.List() {
		if mc, ok := obj.(*unstructured.Unstructured); ok && r.registered(mc) {
			names = append(names, mc.GetName())
		}
	}
	slices.Sort(names)
	r.queue.add(names...)
}

// registered reports whether mc is the ManagedCluster of a registration of
// this hub: it carries a registration id, and this hub's id if any.
func (r *regReporter) registered(mc *unstructured.Unstructured) bool {
	l := mc.GetLabels()
	hub, scoped := l[fleet.LabelHubID]
	return l[fleet.LabelRegistrationID] != "" && (!scoped || hub == r.hubID)
}

// report sends the status of the named clusters' registrations that changed
// since last sent.
func (r *regReporter) report(ctx context.Context, names []string) error {
	var (
		items  []private.RegistrationStatus
		hashes []string
		keys   []string
	)
	now := r.clock.Now()
	for _, name := range names {
		obj, exists, err := r.store.GetByKey(name)
		if err != nil {
			return err
		}
		mc, ok := obj.(*unstructured.Unstructured)
		if !exists || !ok || !r.registered(mc) {
			r.forget(name)
			continue
		}
		manifests, err := r.importManifests(ctx, name)
		if err != nil {
			return err
		}
		// Hashed without the stand-in transition times, which move with the clock.
		h := statusHash(registrationStatus(mc, manifests, time.Time{}))
		r.mu.Lock()
		same := r.sent[name] == h
		r.mu.Unlock()
		if same {
			continue
		}
		items = append(items, registrationStatus(mc, manifests, now))
		hashes, keys = append(hashes, h), append(keys, name)
	}
	if len(items) == 0 {
		return nil
	}
	if err := r.send(ctx, items); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, name := range keys {
		r.sent[name] = hashes[i]
		if items[i].Import == nil {
			r.noImport[name] = true
		} else {
			delete(r.noImport, name)
		}
	}
	return nil
}

func (r *regReporter) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sent, name)
	delete(r.noImport, name)
}

// importManifests reads the import secret <name>-import of namespace <name>,
// which RHACM makes once it accepted the cluster; "" until then.
func (r *regReporter) importManifests(ctx context.Context, name string) (string, error) {
	secret, err := r.hub.Resource(secretGVR).Namespace(name).Get(ctx, name+"-import", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get import secret %s/%s-import: %w", name, name, err)
	}
	r.live.hubOK(r.clock.Now())
	return importManifests(secret)
}

// send puts items in batches of the configured size. A batch refused as too
// large or malformed is halved; a single item refused is sent again without
// its import material, and dropped if still refused.
func (r *regReporter) send(ctx context.Context, items []private.RegistrationStatus) error {
	for chunk := range slices.Chunk(items, r.size) {
		if err := r.sendBatch(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (r *regReporter) sendBatch(ctx context.Context, items []private.RegistrationStatus) error {
	_, err := r.fleet.PutRegistrationsStatus(ctx, items)
	r.metrics.statusBatches.WithLabelValues(outcome(err)).Inc()
	switch {
	case err == nil:
		r.live.fleetOK(r.clock.Now())
		return nil
	case !splittable(err):
		return err
	case len(items) > 1:
		h := len(items) / 2
		if err := r.sendBatch(ctx, items[:h]); err != nil {
			return err
		}
		return r.sendBatch(ctx, items[h:])
	case items[0].Import != nil:
		r.logger.Error("registration status refused with its import material, sending it without", "error", err, "registration_id", items[0].RegistrationId)
		bare := items[0]
		bare.Import = nil
		return r.sendBatch(ctx, []private.RegistrationStatus{bare})
	}
	r.logger.Error("registration status refused, dropped", "error", err, "registration_id", items[0].RegistrationId)
	return nil
}
