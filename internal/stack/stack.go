// Package stack builds the whole service in one place: the stores, the
// authorizer, the API server, the listener and its watches, and the
// reconcilers. `fleet-manager serve` and every test that runs the service
// in process call New, so a new kind is one line of wiring in this file
// beside its own store, handler and domain file.
//
// It parses no flags: configuration stays in cmd/, constructors of the
// adapters stay in their packages. Only binaries and tests import it
// (internal/fleet/deps_test.go).
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/dnsprovider"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/policyschema"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/internal/usermetrics"
)

// Config is the stack's configuration, as serve's flags fill it.
type Config struct {
	// DB is the primary's connection settings; the listener opens its own
	// connection with them.
	DB          postgres.Config
	Store       postgres.StoreConfig
	Queue       postgres.QueueConfig
	HTTP        rest.Config
	Authz       authz.Config
	UserMetrics usermetrics.Config
	DNS         dnsprovider.Config
	// Reconcile configures the reconcilers; Start runs them when Enabled.
	Reconcile reconcile.Config
	// HeartbeatCheck is the longest hub_mgr waits between two passes; zero
	// is a quarter of Store.HeartbeatTimeout, so that a silent hub turns
	// unready within a fraction of its timeout.
	HeartbeatCheck time.Duration
}

// DefaultConfig is every part's default configuration.
func DefaultConfig() Config {
	return Config{
		DB: postgres.DefaultConfig(), Store: postgres.DefaultStoreConfig(), Queue: postgres.DefaultQueueConfig(), HTTP: rest.DefaultConfig(),
		Authz: authz.DefaultConfig(), UserMetrics: usermetrics.DefaultConfig(), DNS: dnsprovider.DefaultConfig(),
		Reconcile: reconcile.DefaultConfig(),
	}
}

// Parts are what the stack is built from that its configuration does not
// make: the open pool, the keys, who says who the caller is, and the
// deliveries that reach outside the database.
type Parts struct {
	// DB is the primary's pool; required.
	DB *postgres.DB
	// Keyring seals the secrets the store keeps; nil keeps none sealed (a
	// store that never writes one).
	Keyring *secrets.Keyring
	// Authenticator says who a request's caller is. Without one the stack
	// has no API server (a replica that only reconciles).
	Authenticator fleet.Authenticator
	// Logger is the service's log; nil discards it.
	Logger *slog.Logger
	// Registerer takes the stack's metrics; nil registers them nowhere a
	// scrape sees.
	Registerer prometheus.Registerer
	// Clock is nil for the system's clock.
	Clock fleet.Clock
	// Replica routes the heavy reads, and Start runs its health checks; nil
	// reads everything on DB.
	Replica *readreplica.Replica
	// Deliveries returns one Delivery per mode this deployment supports,
	// given the stack's store; nil delivers to agent hubs only. A Delivery
	// that is an io.Closer is closed by Stop.
	Deliveries func(*postgres.Store) (map[fleet.DeliveryMode]fleet.Delivery, error)
	// Queue wraps provisioning_mgr's and deleting_mgr's queue (a test that
	// watches or breaks it); nil uses the queue as it is.
	Queue func(*postgres.Queue) fleet.RegistrationQueue
}

// Stack is one replica of the service, built and not yet running.
type Stack struct {
	Store *postgres.Store
	// API is nil when Parts had no Authenticator.
	API       *rest.Server
	Listener  *postgres.Listener
	Revisions *postgres.RevisionWatch
	Inventory *postgres.InventoryWatch
	// Deliveries are the reconcilers' deliveries, by mode.
	Deliveries map[fleet.DeliveryMode]fleet.Delivery

	set     reconcile.Set
	enabled bool
	replica *readreplica.Replica

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New builds the stack: it opens nothing and starts nothing beyond what the
// parts' constructors do; Start runs it.
func New(ctx context.Context, cfg Config, parts Parts) (*Stack, error) {
	if parts.DB == nil {
		return nil, errors.New("stack.New: no DB")
	}
	logger := parts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := parts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	clock := parts.Clock
	if clock == nil {
		clock = fleet.SystemClock{}
	}
	namespace := cfg.HTTP.MetricsNamespace()
	authzMetrics, err := authz.NewMetrics(namespace, reg)
	if err != nil {
		return nil, fmt.Errorf("stack.New: %w", err)
	}
	authorizer, err := authz.New(ctx, cfg.Authz, logger, authzMetrics)
	if err != nil {
		return nil, fmt.Errorf("stack.New: %w", err)
	}
	store := postgres.NewStore(parts.DB, parts.Keyring, clock, cfg.Store, authorizer)
	if parts.Replica != nil {
		// Only a replica that is there: a nil *Replica in the interface
		// would be a router that is not nil.
		store = store.WithReplica(parts.Replica)
	}
	listener := postgres.NewListener(cfg.DB, logger, channels()...)
	s := &Stack{
		Store: store, Listener: listener, Revisions: postgres.NewRevisionWatch(listener),
		Inventory: postgres.NewInventoryWatch(listener), enabled: cfg.Reconcile.Enabled, replica: parts.Replica,
	}
	s.Deliveries = map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: postgres.NewAgentDelivery(store)}
	if parts.Deliveries != nil {
		if s.Deliveries, err = parts.Deliveries(store); err != nil {
			return nil, fmt.Errorf("stack.New: %w", err)
		}
	}
	if parts.Authenticator != nil {
		if s.API, err = newAPI(ctx, cfg, parts.Authenticator, authorizer, store, s, namespace, reg, logger); err != nil {
			s.Stop()
			return nil, fmt.Errorf("stack.New: %w", err)
		}
	}
	reconcileMetrics, err := reconcile.NewMetrics(namespace, reg)
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("stack.New: %w", err)
	}
	q := postgres.NewQueue(store, cfg.Queue)
	var queue fleet.RegistrationQueue = q
	if parts.Queue != nil {
		queue = parts.Queue(q)
	}
	heartbeatCheck := cfg.HeartbeatCheck
	if heartbeatCheck <= 0 {
		heartbeatCheck = cfg.Store.HeartbeatTimeout / 4
	}
	s.set = reconcile.Set{
		Config: cfg.Reconcile, Stores: reconcileStores(store, queue), Scaler: cfg.Store.Pools.Scaler,
		DNS: store.DNSStore, DNSProviders: dnsprovider.New(cfg.DNS), DNSResolver: dnsprovider.NewResolver(cfg.DNS),
		Deliveries: s.Deliveries, TombstoneTables: postgres.TombstoneTables(), Wake: wakeups(listener),
		HeartbeatCheck: heartbeatCheck, Clock: clock, Logger: logger, Metrics: reconcileMetrics,
	}
	return s, nil
}

// newAPI is the API server on store, its long polls woken by s's watches.
func newAPI(ctx context.Context, cfg Config, authn fleet.Authenticator, authorizer fleet.Authorizer, store *postgres.Store,
	s *Stack, namespace string, reg prometheus.Registerer, logger *slog.Logger) (*rest.Server, error) {
	httpMetrics, err := rest.NewHTTPMetrics(cfg.HTTP, reg)
	if err != nil {
		return nil, err
	}
	schema, err := policyschema.New()
	if err != nil {
		return nil, err
	}
	userMetrics, err := usermetrics.NewMetrics(namespace, reg)
	if err != nil {
		return nil, err
	}
	metricsService, err := usermetrics.New(cfg.UserMetrics, store.MetricsStore, namespace, userMetrics, logger)
	if err != nil {
		return nil, err
	}
	api, err := rest.NewServer(ctx, cfg.HTTP, logger, authn, httpMetrics, services(store, apiParts{
		Revisions: s.Revisions, InventoryChanges: s.Inventory, PolicySchema: schema, Metrics: metricsService, Authorizer: authorizer}))
	if err != nil {
		return nil, err
	}
	return api, nil
}

// Start runs, until ctx ends or Stop, the listener, the long polls' watches,
// the read replica's checks and, when the configuration enables them, the
// reconcilers. On an error nothing it started keeps running.
func (s *Stack) Start(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.goRun(func() { s.Listener.Run(ctx) }, func() { s.Revisions.Run(ctx) }, func() { s.Inventory.Run(ctx) })
	if s.replica != nil {
		s.goRun(func() { s.replica.Run(ctx) })
	}
	if !s.enabled {
		return nil
	}
	running, err := reconcile.Start(ctx, s.set)
	if err != nil {
		s.Stop()
		return fmt.Errorf("stack: %w", err)
	}
	s.goRun(running.Wait)
	return nil
}

func (s *Stack) goRun(runs ...func()) {
	for _, run := range runs {
		s.wg.Go(run)
	}
}

// Stop ends what Start runs and waits for it, then closes the deliveries
// that hold connections. Claims the reconcilers held lapse at the end of
// their lease. Stopping twice, or a stack never started, is safe.
func (s *Stack) Stop() {
	s.stopOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		for _, d := range s.Deliveries {
			if c, ok := d.(io.Closer); ok {
				_ = c.Close()
			}
		}
	})
}

// channels are the notification channels the store sends on; a replica's
// listener listens on all of them.
func channels() []string {
	return []string{postgres.ChannelRegistrations, postgres.ChannelHubs, postgres.ChannelHubRevision,
		postgres.ChannelInventory, postgres.ChannelPools, postgres.ChannelDNS}
}

// apiParts is what the API needs beside the stores: the long-poll waiters,
// the policy validator, the user-facing metrics and the authorizer.
type apiParts struct {
	Revisions        fleet.RevisionWaiter
	InventoryChanges fleet.InventoryWaiter
	PolicySchema     fleet.PolicyValidator
	Metrics          fleet.UserMetrics
	Authorizer       fleet.Authorizer
}

// services names the aggregate store that serves each of rest.Services'
// slots.
func services(store *postgres.Store, api apiParts) rest.Services {
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

// reconcileStores names the aggregate store that serves each reconciler;
// queue is provisioning_mgr's and deleting_mgr's. dns_mgr's queue comes
// with its providers (reconcile.Set.DNS).
func reconcileStores(store *postgres.Store, queue fleet.RegistrationQueue) reconcile.Stores {
	return reconcile.Stores{
		Hubs:       store.HubStore,
		Tombstones: store.InventoryStore,
		Policies:   store.PolicyStore,
		Queue:      queue,
		Pools:      store.PoolStore,
	}
}

// wakeups subscribes the reconcilers to listener's channels, polling: while
// the listener is down its checks wake them instead.
func wakeups(listener *postgres.Listener) reconcile.Wakeups {
	return reconcile.Subscribe(listener.SubscribePolling, reconcile.Channels{
		Registrations: postgres.ChannelRegistrations, Hubs: postgres.ChannelHubs, Inventory: postgres.ChannelInventory,
		Pools: postgres.ChannelPools, DNS: postgres.ChannelDNS})
}
