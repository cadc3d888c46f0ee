package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// DeletingManager takes deregistered registrations off their hub and
// soft-deletes them once the hub confirms, freeing its capacity (deleting_mgr).
type DeletingManager struct {
	registrationWorker
	deliveries map[fleet.DeliveryMode]fleet.Delivery
	clock      fleet.Clock
}

// NewDeletingManager returns deleting_mgr.
func NewDeletingManager(cfg Config, queue fleet.RegistrationQueue, deliveries map[fleet.DeliveryMode]fleet.Delivery,
	clock fleet.Clock, owner string, logger *slog.Logger, metrics *Metrics) *DeletingManager {
	m := &DeletingManager{deliveries: deliveries, clock: clock}
	m.registrationWorker = registrationWorker{
		name: "deleting_mgr", kind: fleet.WorkDeprovision, queue: queue, owner: owner, cfg: cfg,
		logger: logger.With("reconciler", "deleting_mgr"), metrics: metrics, reconcile: m.reconcileRegistration,
	}
	return m
}

// Run reconciles until ctx ends, woken by wake.
func (m *DeletingManager) Run(ctx context.Context, wake <-chan string) {
	loop(ctx, m.name, wake, m.cfg.Resync, m.pass)
}

// reconcileRegistration withdraws the registration from its hub and deletes
// it when the hub confirms, or when the hub stays silent past the removal
// timeout (forced, with a reason). An unplaced registration goes at once.
func (m *DeletingManager) reconcileRegistration(ctx context.Context, c fleet.Claim) fleet.Outcome {
	reg, now := c.Registration, m.clock.Now()
	out := fleet.Outcome{ID: reg.ID, Conditions: reg.Conditions, ObservedGeneration: reg.Generation}
	if reg.Hub == nil {
		out.Delete = true
		return out
	}
	hub, err := m.queue.FindHub(ctx, reg.Hub.ID)
	if err != nil {
		out.Err = err
		return out
	}
	report, err := m.withdraw(ctx, hub, reg)
	waited := c.DeletionAge
	if err != nil && waited < m.cfg.RemovalTimeout {
		out.Err = err
		if report.Reason != "" {
			out.Conditions = out.Conditions.MarkFalse(fleet.ConditionDelivered, report.Reason, report.Message, reg.Generation, now)
		}
		return out
	}
	if err != nil {
		report = fleet.DeliveryReport{Message: err.Error()}
	}
	switch {
	case report.Done:
		out.Conditions = out.Conditions.MarkFalse(fleet.ConditionDelivered, report.Reason, report.Message, reg.Generation, now)
		out.Delete = true
	case waited >= m.cfg.RemovalTimeout:
		out.Conditions = out.Conditions.MarkFalse(fleet.ConditionDelivered, fleet.ReasonForcedRemoval,
			fmt.Sprintf("hub %s did not confirm the removal within %s; deleted anyway (%s)", hub.Name, m.cfg.RemovalTimeout, report.Message), reg.Generation, now)
		out.Delete = true
	default:
		out.Conditions = out.Conditions.MarkFalse(fleet.ConditionDelivered, report.Reason, report.Message, reg.Generation, now)
		out.RequeueAfter = min(m.cfg.Resync, m.cfg.RemovalTimeout-waited)
		if report.NoAgent {
			// No agent acknowledgement will wake it: look again soon.
			out.RequeueAfter = min(out.RequeueAfter, m.cfg.Poll)
		}
	}
	return out
}

// withdraw takes the registration's objects off the hub through the hub's
// delivery mode and, in the middle of a move between modes, through the
// mode that delivered them before; done when every one confirms.
func (m *DeletingManager) withdraw(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	modes := []fleet.DeliveryMode{hub.DeliveryMode}
	if reg.DeliveredVia != "" && reg.DeliveredVia != hub.DeliveryMode {
		modes = append(modes, reg.DeliveredVia)
	}
	var combined fleet.DeliveryReport
	for i, mode := range modes {
		report := fleet.DeliveryReport{Reason: fleet.ReasonDeliveryPending,
			Message: fmt.Sprintf("this deployment cannot withdraw from %s hubs", mode)}
		if delivery, ok := m.deliveries[mode]; ok {
			var err error
			if report, err = delivery.Withdraw(ctx, hub, reg); err != nil {
				return report, err
			}
		}
		if i == 0 || combined.Done && !report.Done {
			combined.Reason = report.Reason
		}
		combined.Done = (i == 0 || combined.Done) && report.Done
		combined.NoAgent = combined.NoAgent || report.NoAgent
		combined.Message = strings.TrimPrefix(combined.Message+"; "+report.Message, "; ")
	}
	return combined, nil
}
