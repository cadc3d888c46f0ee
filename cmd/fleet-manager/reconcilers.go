package main

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
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

// startReconcilers starts provisioning_mgr, deleting_mgr, hub_mgr, the
// tombstone purge, the policy resolver and the gauges' refresher in b.
func startReconcilers(b *background, opts serveOptions, logger *slog.Logger, listener *postgres.Listener, store *postgres.Store,
	queue *postgres.Queue, deliveries map[fleet.DeliveryMode]fleet.Delivery, metrics *reconcile.Metrics) {
	ctx, cfg, clock, owner := b.ctx, opts.Reconcile, fleet.SystemClock{}, reconcile.NewOwner()
	prov := reconcile.NewProvisioningManager(cfg, queue, deliveries, clock, owner, logger, metrics)
	del := reconcile.NewDeletingManager(cfg, queue, deliveries, clock, owner, logger, metrics)
	hubs := reconcile.NewHubManager(cfg, store, slices.Sorted(maps.Keys(deliveries)), clock, logger, metrics)
	// Polling: while the listener is down, its checks wake them instead.
	provWake := listener.SubscribePolling(postgres.ChannelRegistrations)
	delWake := listener.SubscribePolling(postgres.ChannelRegistrations)
	hubWake := listener.SubscribePolling(postgres.ChannelHubs)
	inventoryWake := listener.SubscribePolling(postgres.ChannelInventory)
	// A silent hub must turn unready within a fraction of its timeout.
	heartbeatCheck := opts.Store.HeartbeatTimeout / 4
	b.goRun(
		func() { prov.Run(ctx, provWake) },
		func() { del.Run(ctx, delWake) },
		func() { hubs.Run(ctx, hubWake, heartbeatCheck) },
		func() { reconcile.RunHousekeeping(ctx, cfg, store, metrics, logger) },
		func() {
			reconcile.NewTombstonePurge(cfg, store, postgres.TombstoneTables(), clock, logger, metrics).Run(ctx)
		},
		func() { reconcile.NewPolicyResolver(cfg, store, clock, logger, metrics).Run(ctx, inventoryWake) },
	)
	logger.Info("reconcilers started", "owner", owner, "delivery_modes", slices.Sorted(maps.Keys(deliveries)))
}

// stop ends everything in b and waits; claims the reconcilers held lapse at
// the end of their lease.
func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}
