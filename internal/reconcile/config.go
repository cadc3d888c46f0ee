// Package reconcile holds the background reconcilers: provisioning_mgr places
// and delivers registrations, deleting_mgr takes them off their hubs, hub_mgr
// keeps hub conditions and re-queues registrations when hubs change. Each is
// level-triggered: it observes, compares with what is wanted, acts
// idempotently and writes status once per pass. Any number of replicas run
// them side by side; the work queue's leases keep them apart.
package reconcile

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// Config is the reconcilers' timing and sizing.
type Config struct {
	// Enabled runs the reconcilers in `serve`.
	Enabled bool
	// Workers is how many registrations deleting_mgr handles at once, and
	// how many deliveries provisioning_mgr runs at once (an agent hub's
	// share of a batch, or one registration of a hub without batches).
	Workers int
	// BatchSize is how many registrations one claim takes. provisioning_mgr
	// places, publishes and records a claim's registrations together, so a
	// batch much larger than the number of hubs moves each hub's desired set
	// once for many registrations.
	BatchSize int
	// Lease is how long a claim holds; another replica takes the work after.
	Lease time.Duration
	// Resync is the safety net: every reconciler passes this often, woken or not.
	Resync time.Duration
	// Recheck is how often a settled registration is reconciled again, to
	// catch what no wake-up announced (drift).
	Recheck time.Duration
	// Poll is how often a registration waiting on a step no wake-up announces
	// is looked at again: a SyncSet hand-off, Hive deleting a SyncSet's objects.
	Poll time.Duration
	// RemovalTimeout bounds the wait for a hub to confirm a removal.
	RemovalTimeout time.Duration
	// StatsInterval is how often the fleet gauges are refreshed.
	StatsInterval time.Duration
	// TombstoneRetention is how long the inventory keeps a deleted row, for
	// the change feed's consumers; the purge deletes older tombstones.
	TombstoneRetention time.Duration
	// TombstonePurgeBatch is how many tombstones one purge statement deletes.
	TombstonePurgeBatch int
	// PolicyResolve is the shortest time between two placements of the
	// policies on hubs after the inventory moved; they are placed at every
	// Resync too.
	PolicyResolve time.Duration
	// PoolResync is how often pool_mgr looks at every capacity pool without
	// a wake-up: what the hubs report of the pools' clusters (joined,
	// installed, scaled) reaches the scaler within it.
	PoolResync time.Duration
	// DNSResync is how often dns_mgr looks for due records without a
	// wake-up, and how often a record that follows a cluster whose ingress
	// is not known yet is looked at again.
	DNSResync time.Duration
	// DNSBatch is how many of a zone's records one dns_mgr pass takes, and
	// so the largest change batch it sends a provider.
	DNSBatch int
}

// DefaultConfig returns the reconcilers' defaults.
func DefaultConfig() Config {
	return Config{
		Enabled: true, Workers: 8, BatchSize: 5000, Lease: time.Minute, Resync: 5 * time.Minute, Recheck: time.Hour,
		Poll: 10 * time.Second, RemovalTimeout: 30 * time.Minute, StatsInterval: 30 * time.Second,
		TombstoneRetention: 7 * 24 * time.Hour, TombstonePurgeBatch: 1000, PolicyResolve: 5 * time.Second,
		PoolResync: 15 * time.Second, DNSResync: 10 * time.Second, DNSBatch: 500,
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.Enabled, "reconcilers", c.Enabled, "run the reconcilers in this process: provisioning_mgr, deleting_mgr, hub_mgr, the tombstone purge and the policy resolver")
	fs.IntVar(&c.Workers, "reconcile-workers", c.Workers, "registrations deleting_mgr handles at once, and deliveries provisioning_mgr runs at once (an agent hub's share of a batch, or one registration)")
	fs.IntVar(&c.BatchSize, "reconcile-batch-size", c.BatchSize, "registrations one claim takes; provisioning_mgr places, publishes and records them together")
	fs.DurationVar(&c.Lease, "reconcile-lease", c.Lease, "how long a claim holds before another replica may take the work")
	fs.DurationVar(&c.Resync, "reconcile-resync-interval", c.Resync, "how often every reconciler passes even without a wake-up")
	fs.DurationVar(&c.Recheck, "reconcile-recheck-interval", c.Recheck, "how often a settled registration is reconciled again")
	fs.DurationVar(&c.Poll, "reconcile-poll-interval", c.Poll, "how often a registration waiting on a SyncSet step (hand-off, Hive's deletion) is looked at again")
	fs.DurationVar(&c.RemovalTimeout, "reconcile-removal-timeout", c.RemovalTimeout, "how long deleting_mgr waits for a hub to confirm a removal before forcing it")
	fs.DurationVar(&c.StatsInterval, "reconcile-stats-interval", c.StatsInterval, "how often the fleet gauges are refreshed")
	fs.DurationVar(&c.TombstoneRetention, "inventory-tombstone-retention", c.TombstoneRetention,
		"how long deleted inventory rows are kept for the change feed before the purge deletes them")
	fs.IntVar(&c.TombstonePurgeBatch, "inventory-tombstone-purge-batch", c.TombstonePurgeBatch, "tombstones one purge statement deletes")
	fs.DurationVar(&c.PolicyResolve, "policy-resolve-interval", c.PolicyResolve,
		"shortest time between two placements of the configuration policies on hubs after the inventory moved")
	fs.DurationVar(&c.PoolResync, "pool-resync-interval", c.PoolResync,
		"how often pool_mgr looks at every capacity pool without a wake-up, so what the hubs report of its clusters reaches the scaler")
	fs.DurationVar(&c.DNSResync, "dns-resync-interval", c.DNSResync,
		"how often dns_mgr looks for due records without a wake-up, and at a record whose cluster's ingress is not known yet")
	fs.IntVar(&c.DNSBatch, "dns-batch-size", c.DNSBatch, "records of one zone a dns_mgr pass takes: the largest change batch sent to a DNS provider")
}

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	if c.Workers < 1 || c.Workers > 256 {
		p.Addf("reconcile-workers", "must be between 1 and 256 (got %d)", c.Workers)
	}
	if c.TombstonePurgeBatch < 1 || c.TombstonePurgeBatch > 100_000 {
		p.Addf("inventory-tombstone-purge-batch", "must be between 1 and 100000 (got %d)", c.TombstonePurgeBatch)
	}
	if c.DNSBatch < 1 || c.DNSBatch > 1000 {
		p.Addf("dns-batch-size", "must be between 1 and 1000 (got %d)", c.DNSBatch)
	}
	if c.BatchSize < 1 || c.BatchSize > 10_000 {
		p.Addf("reconcile-batch-size", "must be between 1 and 10000 (got %d)", c.BatchSize)
	}
	for flag, d := range map[string]time.Duration{
		"reconcile-lease": c.Lease, "reconcile-resync-interval": c.Resync, "reconcile-recheck-interval": c.Recheck,
		"reconcile-poll-interval": c.Poll, "reconcile-removal-timeout": c.RemovalTimeout, "reconcile-stats-interval": c.StatsInterval,
		"inventory-tombstone-retention": c.TombstoneRetention, "policy-resolve-interval": c.PolicyResolve,
		"pool-resync-interval": c.PoolResync, "dns-resync-interval": c.DNSResync,
	} {
		if d <= 0 {
			p.Addf(flag, "must be positive (got %s)", d)
		}
	}
	return p.Err()
}
