package reconcile

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// PoolManager is pool_mgr: it keeps each capacity pool's clusters as its
// scaler decides (fleet.Scale) from the pool's state in the database. A
// pass claims the pools that are due or were woken (a reservation, an
// update), decides and applies each pool's actions in one transaction under
// its claim; the registrations it adds, changes or removes go on through
// provisioning_mgr and deleting_mgr. Any number of replicas run it side by
// side: a pool's lease keeps them apart.
type PoolManager struct {
	cfg     Config
	scaler  fleet.ScalerConfig
	queue   fleet.PoolQueue
	owner   string
	logger  *slog.Logger
	metrics *Metrics
	woken   *wokenSet
	// held are claims whose answer the database lost, freed when it
	// answers again.
	held heldClaims
}

// poolBatch is how many pools one pass claims.
const poolBatch = 50

// NewPoolManager returns pool_mgr.
func NewPoolManager(cfg Config, scaler fleet.ScalerConfig, queue fleet.PoolQueue, owner string, logger *slog.Logger, metrics *Metrics) *PoolManager {
	return &PoolManager{cfg: cfg, scaler: scaler, queue: queue, owner: owner, logger: logger.With("reconciler", "pool_mgr"),
		metrics: metrics, woken: newWokenSet()}
}

// Run passes at start, on every wake-up (its payload a pool id, claimed
// then even if not due), when a pass left work, and every PoolResync.
func (m *PoolManager) Run(ctx context.Context, wake <-chan string) {
	kick := make(chan string, 1)
	if wake != nil {
		go m.woken.forward(ctx, wake, kick)
	}
	loop(ctx, "pool_mgr", kick, m.cfg.PoolResync, m.pass)
}

func (m *PoolManager) pass(ctx context.Context) (time.Duration, bool) {
	taken := m.woken.take()
	claims, _, err := claimHeld(ctx, &m.held, m.owner, m.cfg.Lease, m.queue.ReleasePools,
		func(ctx context.Context, token string) ([]fleet.PoolClaim, error) {
			return m.queue.ClaimPools(ctx, token, sorted(taken), poolBatch, m.cfg.Lease)
		})
	if err != nil {
		logFailure(ctx, m.logger, "claiming capacity pools", err)
		return m.cfg.Poll, true
	}
	for _, c := range claims {
		m.reconcilePool(ctx, c)
	}
	claimed := make(map[string]bool, len(claims))
	for _, c := range claims {
		claimed[c.Input.Pool.ID] = true
	}
	pending := m.woken.settle(taken, claimed)
	switch {
	case len(claims) == poolBatch:
		return 0, true
	case pending:
		return wokenRetryDelay, true
	}
	return 0, false
}

// reconcilePool decides and applies one pool's pass.
func (m *PoolManager) reconcilePool(ctx context.Context, c fleet.PoolClaim) {
	defer logPanic(m.logger, c.Input.Pool.ID)
	start := time.Now()
	actions := fleet.Scale(c.Input, m.scaler)
	held, err := untilAnswered(ctx, func(ctx context.Context) (bool, error) {
		return m.queue.ApplyPoolPass(ctx, c, actions, m.cfg.PoolResync, nil)
	})
	outcome := outcomeDone
	switch {
	case err != nil:
		outcome = outcomeError
		logFailure(ctx, m.logger, "applying a capacity pool's scaling", err, "pool_id", c.Input.Pool.ID)
		// Record the failure under the claim, so the pool backs off.
		if _, ferr := m.queue.ApplyPoolPass(ctx, c, nil, m.cfg.PoolResync, err); ferr != nil {
			logFailure(ctx, m.logger, "recording a capacity pool's failed pass", ferr, "pool_id", c.Input.Pool.ID)
		}
	case !held:
		outcome = outcomeLost
	default:
		for _, a := range actions {
			m.metrics.poolActions.WithLabelValues(a.Type, a.Reason).Inc()
			m.logger.Info("capacity pool scaled", "pool_id", c.Input.Pool.ID, "action", a.Type, "reason", a.Reason,
				"cluster_id", a.ClusterID, "message", a.Message)
		}
	}
	m.metrics.duration.WithLabelValues("pool_mgr", outcome).Observe(time.Since(start).Seconds())
}
