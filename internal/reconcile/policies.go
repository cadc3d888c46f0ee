package reconcile

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// PolicyStore places configuration policies on hubs.
type PolicyStore interface {
	// ResolvePolicies places every live policy on the hubs it reaches now
	// and returns how many hubs' desired sets moved.
	ResolvePolicies(ctx context.Context) (int, error)
}

// PolicyResolver keeps each configuration policy on the hubs that hold a
// cluster its placement selects, as the inventory moves under it: a cluster
// joins, leaves or changes labels. Writes of the policies themselves place
// them at once; this catches the inventory. Any number of replicas may run
// it side by side (each policy is resolved under its row lock).
type PolicyResolver struct {
	cfg     Config
	store   PolicyStore
	clock   fleet.Clock
	logger  *slog.Logger
	metrics *Metrics
	last    time.Time
}

// NewPolicyResolver returns the resolver.
func NewPolicyResolver(cfg Config, store PolicyStore, clock fleet.Clock, logger *slog.Logger, metrics *Metrics) *PolicyResolver {
	return &PolicyResolver{cfg: cfg, store: store, clock: clock, logger: logger.With("reconciler", "policy_resolver"), metrics: metrics}
}

// Run resolves at start, after every inventory change (at most once per
// PolicyResolve) and every Resync, until ctx ends.
func (r *PolicyResolver) Run(ctx context.Context, inventoryMoved <-chan string) {
	loop(ctx, "policy_resolver", inventoryMoved, r.cfg.Resync, r.pass)
}

// pass resolves unless the last pass was less than PolicyResolve ago; then
// it asks to run when that time is up, so a burst of ingests costs one pass.
func (r *PolicyResolver) pass(ctx context.Context) (time.Duration, bool) {
	now := r.clock.Now()
	if wait := r.last.Add(r.cfg.PolicyResolve).Sub(now); !r.last.IsZero() && wait > 0 {
		return wait, true
	}
	r.last = now
	if err := r.resolve(ctx); err != nil {
		logFailure(ctx, r.logger, "placing policies on hubs", err)
	}
	return 0, false
}

// resolve places every policy now and records the pass.
func (r *PolicyResolver) resolve(ctx context.Context) error {
	start, outcome := time.Now(), outcomeDone
	moved, err := r.store.ResolvePolicies(ctx)
	if err != nil {
		outcome = outcomeError
	} else if moved > 0 {
		r.logger.Info("policies placed; hubs' desired sets moved", "hubs", moved)
	}
	r.metrics.duration.WithLabelValues("policy_resolver", outcome).Observe(time.Since(start).Seconds())
	return err
}
