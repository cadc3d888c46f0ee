package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/fleetmanager/fleet-manager/internal/dnsprovider"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
	"github.com/fleetmanager/fleet-manager/internal/stack"
)

// background is what a replica runs beside its servers: the notification
// listener, the long-poll wake-ups and, when enabled, the reconcilers. It
// outlives the servers' graceful shutdown and is stopped after it.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startBackground starts the listener, the revision watch and the inventory watch.
func startBackground(ctx context.Context, listener *postgres.Listener, watch *postgres.RevisionWatch,
	inventory *postgres.InventoryWatch) *background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b := &background{ctx: ctx, cancel: cancel}
	b.goRun(func() { listener.Run(ctx) }, func() { watch.Run(ctx) }, func() { inventory.Run(ctx) })
	return b
}

func (b *background) goRun(runs ...func()) {
	for _, run := range runs {
		b.wg.Add(1)
		go func() { defer b.wg.Done(); run() }()
	}
}

// startReconcilers starts the reconcilers in b, woken by listener's
// notifications; polling, so that while the listener is down its checks
// wake them instead.
func startReconcilers(b *background, opts serveOptions, logger *slog.Logger, listener *postgres.Listener, store *postgres.Store,
	queue *postgres.Queue, deliveries map[fleet.DeliveryMode]fleet.Delivery, metrics *reconcile.Metrics) error {
	running, err := reconcile.Start(b.ctx, reconcile.Set{
		Config: opts.Reconcile, Stores: stack.ReconcileStores(store, queue), Scaler: opts.Store.Pools.Scaler,
		DNS: store.DNSStore, DNSProviders: dnsprovider.New(opts.DNS), DNSResolver: dnsprovider.NewResolver(opts.DNS),
		Deliveries: deliveries, TombstoneTables: postgres.TombstoneTables(),
		Wake: stack.Wakeups(listener),
		// A silent hub must turn unready within a fraction of its timeout.
		HeartbeatCheck: opts.Store.HeartbeatTimeout / 4,
		Clock:          fleet.SystemClock{}, Logger: logger, Metrics: metrics,
	})
	if err != nil {
		return err
	}
	b.goRun(running.Wait)
	return nil
}

// stop ends everything in b and waits; claims the reconcilers held lapse at
// the end of their lease.
func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}
