// Package stack is the one place that says which store answers each
// service the API and the reconcilers ask for, and which notification
// channels wake them. `fleet-manager serve` and every test that runs the
// API or the reconcilers in process build them here, so a new kind is one
// line of wiring in this file beside its own store, handler and domain file.
//
// It holds no behaviour: constructors of the adapters stay in their
// packages, configuration stays in cmd/. Only binaries and tests import it
// (internal/fleet/deps_test.go).
package stack

import (
	"log/slog"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
	"github.com/fleetmanager/fleet-manager/internal/rest"
)

// Channels are the notification channels the store sends on; a replica's
// listener listens on all of them.
func Channels() []string {
	return []string{postgres.ChannelRegistrations, postgres.ChannelHubs, postgres.ChannelHubRevision,
		postgres.ChannelInventory, postgres.ChannelPools, postgres.ChannelDNS}
}

// NewListener returns a listener on every channel of Channels.
func NewListener(cfg postgres.Config, logger *slog.Logger) *postgres.Listener {
	return postgres.NewListener(cfg, logger, Channels()...)
}

// API is what the API needs beside the stores: the long-poll waiters, the
// policy validator, the user-facing metrics and the authorizer. A nil field
// leaves its operations to answer as rest.Services says.
type API struct {
	Revisions        fleet.RevisionWaiter
	InventoryChanges fleet.InventoryWaiter
	PolicySchema     fleet.PolicyValidator
	Metrics          fleet.UserMetrics
	Authorizer       fleet.Authorizer
}

// Services names the aggregate store that serves each of rest.Services'
// slots.
func Services(store *postgres.Store, api API) rest.Services {
	return rest.Services{
		Registrations:    store.RegistrationStore,
		Hubs:             store.HubStore,
		Agents:           store.HubStore,
		Inventory:        store.InventoryStore,
		Resources:        store.InventoryStore,
		Feed:             store.InventoryStore,
		Policies:         store.PolicyStore,
		Blueprints:       store.BlueprintStore,
		Pools:            store.PoolStore,
		DNSAdmin:         store.DNSStore,
		DNSRecords:       store.DNSStore,
		Revisions:        api.Revisions,
		InventoryChanges: api.InventoryChanges,
		PolicySchema:     api.PolicySchema,
		Metrics:          api.Metrics,
		Authorizer:       api.Authorizer,
	}
}

// ReconcileStores names the aggregate store that serves each reconciler;
// queue is provisioning_mgr's and deleting_mgr's (postgres.NewQueue, or a
// test's wrapper of it). dns_mgr's queue comes with its providers
// (reconcile.Set.DNS).
func ReconcileStores(store *postgres.Store, queue fleet.RegistrationQueue) reconcile.Stores {
	return reconcile.Stores{
		Hubs:       store.HubStore,
		Tombstones: store.InventoryStore,
		Policies:   store.PolicyStore,
		Queue:      queue,
		Pools:      store.PoolStore,
	}
}

// Wakeups subscribes the reconcilers to listener's channels, polling: while
// the listener is down its checks wake them instead.
func Wakeups(listener *postgres.Listener) reconcile.Wakeups {
	return reconcile.Subscribe(listener.SubscribePolling, reconcile.Channels{
		Registrations: postgres.ChannelRegistrations, Hubs: postgres.ChannelHubs, Inventory: postgres.ChannelInventory,
		Pools: postgres.ChannelPools, DNS: postgres.ChannelDNS})
}
