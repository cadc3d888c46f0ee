package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// Options are what the agent gets from the process rather than from flags.
type Options struct {
	// Version is the agent's build, reported in heartbeats.
	Version string
	// StartGeneration moves at every start of the process (its start time in
	// nanoseconds), so the fleet manager sees a restart.
	StartGeneration int64
	Logger          *slog.Logger
	Metrics         *Metrics
	Clock           fleet.Clock
	// Identity names this process in the hub's lease (the pod's name and
	// the start generation); empty means the host name and the generation.
	Identity string
}

// Agent is fleetshard-sync for one hub.
type Agent struct {
	cfg             Config
	fleet           *FleetClient
	hub             *Hub
	logger          *slog.Logger
	metrics         *Metrics
	clock           fleet.Clock
	version         string
	startGeneration int64
	identity        string
	leaseNamespace  string
	// leading is true while this agent holds the hub's lease.
	leading atomic.Bool

	applier   *applier
	informer  cache.SharedIndexInformer
	inventory *kindSync[private.ManagedClusterSummary]
	reporter  *regReporter
	live      liveness

	// applied is the revision of the last desired set acknowledged: every
	// entry applied but those that failed alone (lastPass holds them).
	applied atomic.Int64
	// appliedHistory is the history applied's revision counts in (the
	// set's revision_history), stored before applied.
	appliedHistory atomic.Pointer[string]
	heartbeatNow   chan struct{}
	resync         chan struct{}

	readyMu     sync.Mutex
	readyStatus private.ConditionStatus
	readySince  time.Time
	// lastPass is the outcome of the last pass over a desired set.
	lastPass passRecord
}

// New returns the agent of the hub, talking to the fleet manager through fc.
func New(cfg Config, fc *FleetClient, hub *Hub, opts Options) *Agent {
	a := &Agent{
		cfg: cfg, fleet: fc, hub: hub, logger: opts.Logger, metrics: opts.Metrics, clock: opts.Clock,
		version: opts.Version, startGeneration: opts.StartGeneration,
		heartbeatNow: make(chan struct{}, 1), resync: make(chan struct{}, 1),
		identity: opts.Identity, leaseNamespace: cfg.LeaseNamespace,
	}
	if a.identity == "" {
		host, _ := os.Hostname()
		a.identity = fmt.Sprintf("%s_%d", host, opts.StartGeneration)
	}
	if a.leaseNamespace == "" {
		a.leaseNamespace = metav1.NamespaceDefault
	}
	a.applier = &applier{hub: hub, hubID: cfg.HubID, fieldManager: cfg.FieldManager, deletionTimeout: cfg.DeletionTimeout, logger: a.logger}
	a.informer = dynamicinformer.NewFilteredDynamicInformer(hub.Dynamic, managedClusterGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	a.inventory = a.newInventory()
	now := func() time.Time { return a.clock.Now() }
	a.reporter = &regReporter{
		fleet: fc, hubID: cfg.HubID, store: a.informer.GetStore(), hub: hub.Dynamic, queue: newBatcher(cfg.InventoryBatchSize, cfg.InventoryBatchDelay, now), size: cfg.InventoryBatchSize,
		metrics: a.metrics, logger: a.logger.With("component", "registration-status"), live: &a.live, clock: a.clock,
		sent: map[string]string{}, noImport: map[string]bool{},
	}
	return a
}

// Run runs the agent until ctx ends. It waits for the hub's lease first, so
// that one agent of a hub acts at a time; holding it, it runs the
// desired-set loop, the heartbeat, and, once the ManagedCluster informer
// synced, the inventory and the registration status. It returns after every
// loop stopped and the lease was released: nil when ctx ended, ErrLeaseLost
// when the lease could not be renewed.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.inventory.watch(); err != nil {
		return fmt.Errorf("Run: %w", err)
	}
	a.logger.Info("agent starting", "hub_id", a.cfg.HubID, "version", a.version, "start_generation", a.startGeneration)
	err := a.runElected(ctx, a.runLoops)
	a.logger.Info("agent stopped")
	return err
}

// runLoops runs every loop until ctx ends.
func (a *Agent) runLoops(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { a.runDesired(ctx) })
	wg.Go(func() { a.runHeartbeat(ctx) })
	wg.Go(func() { a.runResources(ctx) })
	wg.Go(func() { a.inventory.run(ctx, a.cfg.ResyncInterval) })
	wg.Wait()
}
