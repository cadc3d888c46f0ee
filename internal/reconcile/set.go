package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// HubStore is what hub_mgr and the housekeeping need of the hubs' store.
type HubStore interface {
	fleet.HubMonitor
	Housekeeper
}

// Wakeups are the channels that wake reconcilers before their resync. Each
// is a subscription of its own, since one wake-up reaches one receiver; a
// nil channel leaves its reconciler to its resync.
type Wakeups struct {
	// Provisioning and Deleting receive a wake-up when a registration changed.
	Provisioning, Deleting <-chan string
	// Hubs receives a wake-up when a hub changed.
	Hubs <-chan string
	// Inventory receives a wake-up when the inventory moved.
	Inventory <-chan string
	// Pools receives a pool's id when it or its reservations changed.
	Pools <-chan string
	// DNS receives a zone's id when one of its records changed.
	DNS <-chan string
}

// Channels names the notification channels on which registrations, hubs
// and the inventory change (the store's).
type Channels struct {
	Registrations, Hubs, Inventory, Pools, DNS string
}

// Subscribe returns a set's wake-ups, each its own subscription made with
// subscribe (a listener's) to the channel of ch that concerns it.
func Subscribe(subscribe func(channel string) <-chan string, ch Channels) Wakeups {
	return Wakeups{
		Provisioning: subscribe(ch.Registrations), Deleting: subscribe(ch.Registrations),
		Hubs: subscribe(ch.Hubs), Inventory: subscribe(ch.Inventory), Pools: subscribe(ch.Pools), DNS: subscribe(ch.DNS),
	}
}

// Stores are the stores the reconcilers read and write, one per aggregate
// (internal/stack fills them from the PostgreSQL store).
type Stores struct {
	// Hubs is hub_mgr's view of the hubs and the housekeeping's gauges and purges.
	Hubs HubStore
	// Tombstones is the tombstone purge's store.
	Tombstones TombstoneStore
	// Policies is the policy resolver's store.
	Policies PolicyStore
	// Queue is provisioning_mgr's and deleting_mgr's queue.
	Queue fleet.RegistrationQueue
	// Pools is pool_mgr's queue.
	Pools fleet.PoolQueue
}

// Set is what the reconcilers of a replica run on. Start runs them all;
// a caller that needs them to behave differently changes Config, not the set.
type Set struct {
	Config Config
	Stores
	// Scaler is pool_mgr's scaling settings.
	Scaler fleet.ScalerConfig
	// DNS is dns_mgr's queue, DNSProviders its provider of each kind this
	// deployment writes to and DNSResolver how it asks authoritative
	// servers; without a queue dns_mgr does not run.
	DNS          fleet.DNSQueue
	DNSProviders map[fleet.DNSProviderKind]fleet.DNSProvider
	DNSResolver  fleet.DNSResolver
	// Deliveries holds one Delivery per mode this deployment supports.
	Deliveries map[fleet.DeliveryMode]fleet.Delivery
	// TombstoneTables are the inventory tables the purge works through: the
	// store's own list (postgres.TombstoneTables).
	TombstoneTables []string
	Wake            Wakeups
	// HeartbeatCheck is the longest hub_mgr waits between two passes, so
	// that a silent hub turns unready in time.
	HeartbeatCheck time.Duration
	Clock          fleet.Clock
	Logger         *slog.Logger
	Metrics        *Metrics
}

// validate reports every missing dependency and invalid setting of s.
func (s Set) validate() error {
	errs := []error{s.Config.Validate()}
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Hubs", s.Hubs == nil}, {"Tombstones", s.Tombstones == nil}, {"Policies", s.Policies == nil}, {"Queue", s.Queue == nil}, {"Pools", s.Pools == nil}, {"Deliveries", len(s.Deliveries) == 0},
		{"TombstoneTables", len(s.TombstoneTables) == 0}, {"HeartbeatCheck", s.HeartbeatCheck <= 0},
		{"Clock", s.Clock == nil}, {"Logger", s.Logger == nil}, {"Metrics", s.Metrics == nil},
		{"DNSResolver", s.DNS != nil && s.DNSResolver == nil},
	} {
		if dep.missing {
			errs = append(errs, fmt.Errorf("no %s", dep.name))
		}
	}
	return errors.Join(errs...)
}

// Running is a started set of reconcilers.
type Running struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Start runs every reconciler of a replica until ctx ends or Stop:
// provisioning_mgr, deleting_mgr, hub_mgr, the housekeeping (fleet gauges,
// idempotency keys), the tombstone purge, the policy resolver, pool_mgr and
// dns_mgr (with a DNS queue). It refuses
// a set with a missing dependency or an invalid Config.
func Start(ctx context.Context, s Set) (*Running, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("reconcile.Start: %w", err)
	}
	cfg, clock, logger, metrics, owner := s.Config, s.Clock, s.Logger, s.Metrics, NewOwner()
	modes := slices.Sorted(maps.Keys(s.Deliveries))
	prov := NewProvisioningManager(cfg, s.Queue, s.Deliveries, clock, owner, logger, metrics)
	del := NewDeletingManager(cfg, s.Queue, s.Deliveries, clock, owner, logger, metrics)
	hubs := NewHubManager(cfg, s.Hubs, modes, clock, logger, metrics)
	purge := NewTombstonePurge(cfg, s.Tombstones, s.TombstoneTables, clock, logger, metrics)
	policies := NewPolicyResolver(cfg, s.Policies, clock, logger, metrics)
	pools := NewPoolManager(cfg, s.Scaler, s.Pools, owner, logger, metrics)
	ctx, cancel := context.WithCancel(ctx)
	r := &Running{cancel: cancel}
	for _, run := range []func(){
		func() { prov.Run(ctx, s.Wake.Provisioning) },
		func() { del.Run(ctx, s.Wake.Deleting) },
		func() { hubs.Run(ctx, s.Wake.Hubs, s.HeartbeatCheck) },
		func() { RunHousekeeping(ctx, cfg, s.Hubs, metrics, logger) },
		func() { purge.Run(ctx) },
		func() { policies.Run(ctx, s.Wake.Inventory) },
		func() { pools.Run(ctx, s.Wake.Pools) },
	} {
		r.done.Go(run)
	}
	if s.DNS != nil {
		dns := NewDNSManager(cfg, s.DNS, s.DNSProviders, s.DNSResolver, clock, owner, logger, metrics)
		r.done.Go(func() { dns.Run(ctx, s.Wake.DNS) })
	}
	logger.Info("reconcilers started", "owner", owner, "delivery_modes", modes)
	return r, nil
}

// Wait returns once every reconciler has ended, after ctx ended or Stop.
// Claims they held lapse at the end of their lease.
func (r *Running) Wait() { r.done.Wait() }

// Stop ends every reconciler and waits for them.
func (r *Running) Stop() {
	r.cancel()
	r.Wait()
}
