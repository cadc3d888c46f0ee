package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// HubManager keeps every hub's Ready condition true to its heartbeats and
// re-queues unplaced registrations when a hub can take them (hub_mgr).
type HubManager struct {
	cfg     Config
	monitor fleet.HubMonitor
	modes   []fleet.DeliveryMode
	clock   fleet.Clock
	logger  *slog.Logger
	metrics *Metrics
}

// NewHubManager returns hub_mgr; modes are the delivery modes this
// deployment can deliver to.
func NewHubManager(cfg Config, monitor fleet.HubMonitor, modes []fleet.DeliveryMode, clock fleet.Clock, logger *slog.Logger, metrics *Metrics) *HubManager {
	return &HubManager{cfg: cfg, monitor: monitor, modes: modes, clock: clock, logger: logger.With("reconciler", "hub_mgr"), metrics: metrics}
}

// Run reconciles until ctx ends, woken by wake (a hub changed). It passes at
// least every heartbeatCheck, so a silent hub turns unready in time.
func (m *HubManager) Run(ctx context.Context, wake <-chan string, heartbeatCheck time.Duration) {
	loop(ctx, "hub_mgr", wake, min(m.cfg.Resync, heartbeatCheck), m.pass)
}

func (m *HubManager) pass(ctx context.Context) (time.Duration, bool) {
	start := time.Now()
	outcome := outcomeDone
	defer func() { m.metrics.duration.WithLabelValues("hub_mgr", outcome).Observe(time.Since(start).Seconds()) }()
	hubs, err := m.monitor.ListHubLiveness(ctx)
	if err != nil {
		outcome = outcomeError
		logFailure(ctx, m.logger, "listing hubs", err)
		return 0, false
	}
	counts := map[fleet.ConditionStatus]int{}
	for _, h := range hubs {
		conds := readyCondition(h, slices.Contains(m.modes, h.Hub.DeliveryMode), m.clock.Now())
		counts[conds.Status(fleet.ConditionHubReady)]++
		if conds.Status(fleet.ConditionHubReady) == fleet.ConditionFalse && !h.Hub.InventoryStale {
			if err := m.monitor.MarkInventoryStale(ctx, h.Hub.ID); err != nil {
				outcome = outcomeError
				logFailure(ctx, m.logger, "marking a silent hub's inventory stale", err, "hub", h.Hub.Name)
			}
		}
		if conds.Equal(h.Hub.Conditions) {
			continue
		}
		ready, _ := conds.Get(fleet.ConditionHubReady)
		if err := m.monitor.SetHubReadyCondition(ctx, h.Hub.ID, ready); err != nil {
			outcome = outcomeError
			logFailure(ctx, m.logger, "writing hub conditions", err, "hub", h.Hub.Name)
		}
	}
	m.metrics.setHubs(counts)
	if n, err := m.monitor.RequeueUnplaced(ctx, m.modes, m.cfg.BatchSize); err != nil {
		outcome = outcomeError
		logFailure(ctx, m.logger, "re-queueing unplaced registrations", err)
	} else if n > 0 {
		m.logger.Info("re-queued unplaced registrations", "count", n)
	}
	return 0, false
}

// readyCondition is the pure rule for a hub's Ready condition; supported
// tells whether this deployment can deliver to the hub's mode.
func readyCondition(h fleet.HubLiveness, supported bool, now time.Time) fleet.Conditions {
	cs, gen := h.Hub.Conditions, h.Hub.Generation
	switch {
	case !supported:
		return cs.MarkFalse(fleet.ConditionHubReady, fleet.ReasonDeliveryPending,
			fmt.Sprintf("this deployment cannot deliver to %s hubs", h.Hub.DeliveryMode), gen, now)
	case h.Hub.DeliveryMode != fleet.DeliveryAgent:
		return cs.MarkTrue(fleet.ConditionHubReady, fleet.ReasonNoAgentNeeded, "registrations reach this hub through a SyncSet", gen, now)
	case h.HeartbeatFresh && cs.Status(fleet.ConditionHubAgentReady) == fleet.ConditionFalse:
		agent, _ := cs.Get(fleet.ConditionHubAgentReady)
		return cs.MarkFalse(fleet.ConditionHubReady, fleet.ReasonAgentNotReady,
			"the hub's agent reports in time but not ready: "+agent.Reason, gen, now)
	case h.HeartbeatFresh:
		return cs.MarkTrue(fleet.ConditionHubReady, fleet.ReasonHeartbeatFresh, "the hub's agent reports in time", gen, now)
	case h.Hub.LastHeartbeatAt == nil:
		return cs.MarkUnknown(fleet.ConditionHubReady, fleet.ReasonAwaitingHeartbeat, "the hub's agent has not reported yet", gen, now)
	default:
		return cs.MarkFalse(fleet.ConditionHubReady, fleet.ReasonHeartbeatTimeout,
			"the hub's agent last reported at "+h.Hub.LastHeartbeatAt.UTC().Format(time.RFC3339), gen, now)
	}
}

// Housekeeper reads the fleet gauges and purges what outlived its use.
type Housekeeper interface {
	Stats(ctx context.Context) (fleet.FleetStats, error)
	PurgeIdempotencyKeys(ctx context.Context) (int, error)
}

// RunHousekeeping refreshes the fleet gauges and purges expired idempotency
// keys every StatsInterval until ctx ends.
func RunHousekeeping(ctx context.Context, cfg Config, source Housekeeper, metrics *Metrics, logger *slog.Logger) {
	loop(ctx, "housekeeping", nil, cfg.StatsInterval, func(ctx context.Context) (time.Duration, bool) {
		if stats, err := source.Stats(ctx); err != nil {
			logFailure(ctx, logger, "reading fleet stats", err)
		} else {
			metrics.setStats(stats)
		}
		if n, err := source.PurgeIdempotencyKeys(ctx); err != nil {
			logFailure(ctx, logger, "purging expired idempotency keys", err)
		} else if n > 0 {
			logger.Info("purged expired idempotency keys", "count", n)
		}
		return 0, false
	})
}
