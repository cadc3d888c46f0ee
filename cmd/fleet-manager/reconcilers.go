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

// reconcilers are the background workers of one replica.
type reconcilers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startReconcilers starts the listener, provisioning_mgr, deleting_mgr,
// hub_mgr and the gauges' refresher; stop ends them.
func startReconcilers(ctx context.Context, opts serveOptions, logger *slog.Logger, store *postgres.Store, queue *postgres.Queue,
	deliveries map[fleet.DeliveryMode]fleet.Delivery, metrics *reconcile.Metrics) *reconcilers {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &reconcilers{cancel: cancel}
	cfg, clock, owner := opts.Reconcile, fleet.SystemClock{}, reconcile.NewOwner()
	listener := postgres.NewListener(opts.DB.Config, logger, postgres.ChannelRegistrations, postgres.ChannelHubs)
	prov := reconcile.NewProvisioningManager(cfg, queue, deliveries, clock, owner, logger, metrics)
	del := reconcile.NewDeletingManager(cfg, queue, deliveries, clock, owner, logger, metrics)
	hubs := reconcile.NewHubManager(cfg, store, slices.Sorted(maps.Keys(deliveries)), clock, logger, metrics)
	provWake := listener.Subscribe(postgres.ChannelRegistrations)
	delWake := listener.Subscribe(postgres.ChannelRegistrations)
	hubWake := listener.Subscribe(postgres.ChannelHubs)
	// A silent hub must turn unready within a fraction of its timeout.
	heartbeatCheck := opts.Store.HeartbeatTimeout / 4
	for _, run := range []func(){
		func() { listener.Run(ctx) },
		func() { prov.Run(ctx, provWake) },
		func() { del.Run(ctx, delWake) },
		func() { hubs.Run(ctx, hubWake, heartbeatCheck) },
		func() { reconcile.RunHousekeeping(ctx, cfg, store, metrics, logger) },
	} {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); run() }()
	}
	logger.Info("reconcilers started", "owner", owner, "delivery_modes", slices.Sorted(maps.Keys(deliveries)))
	return r
}

// stop ends the reconcilers and waits for them; claims they held lapse at the
// end of their lease.
func (r *reconcilers) stop() {
	r.cancel()
	r.wg.Wait()
}
