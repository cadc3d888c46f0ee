package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// ProvisioningManager places accepted registrations on a hub and delivers
// them there (provisioning_mgr).
type ProvisioningManager struct {
	registrationWorker
	deliveries map[fleet.DeliveryMode]fleet.Delivery
	clock      fleet.Clock
}

// NewProvisioningManager returns provisioning_mgr; deliveries holds one
// Delivery per mode this deployment supports.
func NewProvisioningManager(cfg Config, queue fleet.RegistrationQueue, deliveries map[fleet.DeliveryMode]fleet.Delivery,
	clock fleet.Clock, owner string, logger *slog.Logger, metrics *Metrics) *ProvisioningManager {
	m := &ProvisioningManager{deliveries: deliveries, clock: clock}
	m.registrationWorker = registrationWorker{
		name: "provisioning_mgr", kind: fleet.WorkProvision, queue: queue, owner: owner, cfg: cfg,
		logger: logger.With("reconciler", "provisioning_mgr"), metrics: metrics, reconcile: m.reconcileRegistration,
	}
	return m
}

// Run reconciles until ctx ends, woken by wake.
func (m *ProvisioningManager) Run(ctx context.Context, wake <-chan string) {
	loop(ctx, wake, m.cfg.Resync, m.pass)
}

// reconcileRegistration observes where the registration stands and takes the
// next step: place it, then deliver its current generation.
func (m *ProvisioningManager) reconcileRegistration(ctx context.Context, c fleet.Claim) fleet.Outcome {
	reg, now := c.Registration, m.clock.Now()
	out := fleet.Outcome{ID: reg.ID, Conditions: reg.Conditions, ObservedGeneration: reg.Generation}
	hub, err := m.queue.PlaceRegistration(ctx, reg.ID, c.Token, supportedModes(m.deliveries))
	if err != nil {
		out.Err = err
		return out
	}
	if hub == nil {
		out.Conditions = out.Conditions.MarkFalse(fleet.ConditionPlaced, fleet.ReasonNoHubAvailable,
			fmt.Sprintf("no ready, uncordoned hub with room in zone %s; retried when hubs change", reg.Zone), reg.Generation, now)
		out.RequeueAfter = m.cfg.Recheck
		return out
	}
	out.Conditions = out.Conditions.MarkTrue(fleet.ConditionPlaced, fleet.ReasonHubSelected,
		fmt.Sprintf("placed on hub %s (zone %s, region %s)", hub.Name, hub.Zone, hub.Region), reg.Generation, now)
	delivery, ok := m.deliveries[hub.DeliveryMode]
	if !ok {
		out.Conditions = out.Conditions.MarkUnknown(fleet.ConditionDelivered, fleet.ReasonDeliveryPending,
			fmt.Sprintf("this deployment cannot deliver to %s hubs", hub.DeliveryMode), reg.Generation, now)
		out.RequeueAfter = m.cfg.Resync
		return out
	}
	report, err := delivery.Deliver(ctx, *hub, reg)
	if err != nil {
		out.Err = err
		if report.Reason != "" {
			out.Conditions = setDelivered(out.Conditions, report, reg.Generation, now)
		}
		return out
	}
	out.Conditions = setDelivered(out.Conditions, report, reg.Generation, now)
	// The agent's acknowledgement wakes this registration; the requeue is the
	// safety net, and a settled registration is still looked at now and then.
	out.RequeueAfter = m.cfg.Recheck
	if !report.Done {
		out.RequeueAfter = m.cfg.Resync
		return out
	}
	if reg.DeliveredVia == "" || reg.DeliveredVia == hub.DeliveryMode {
		out.DeliveredVia = hub.DeliveryMode
		return out
	}
	return m.handOff(ctx, *hub, reg, out, now)
}

// handOff finishes a hub's move to another delivery mode: the hub's mode now
// holds the registration's objects, and the mode that delivered them before
// lets go of them without removing them from the hub. A mode that holds
// nothing of its own on the hub (the agent's desired set follows the hub) has
// nothing to let go of.
func (m *ProvisioningManager) handOff(ctx context.Context, hub fleet.Hub, reg fleet.Registration, out fleet.Outcome, now time.Time) fleet.Outcome {
	previous, ok := m.deliveries[reg.DeliveredVia]
	if !ok {
		out.Conditions = out.Conditions.MarkTrue(fleet.ConditionDelivered, fleet.ReasonHandingOff,
			fmt.Sprintf("%s delivery holds the objects; this deployment cannot release them from %s delivery", hub.DeliveryMode, reg.DeliveredVia), reg.Generation, now)
		out.RequeueAfter = m.cfg.Resync
		return out
	}
	releaser, ok := previous.(fleet.Releaser)
	if !ok {
		out.DeliveredVia = hub.DeliveryMode
		return out
	}
	released, err := releaser.Release(ctx, hub, reg)
	if err != nil || !released.Done {
		msg := released.Message
		if err != nil {
			msg = err.Error()
		}
		out.Conditions = out.Conditions.MarkTrue(fleet.ConditionDelivered, fleet.ReasonHandingOff,
			fmt.Sprintf("%s delivery holds the objects; releasing them from %s delivery: %s", hub.DeliveryMode, reg.DeliveredVia, msg), reg.Generation, now)
		out.Err, out.RequeueAfter = err, min(m.cfg.Poll, m.cfg.Resync)
		return out
	}
	out.DeliveredVia = hub.DeliveryMode
	return out
}

// setDelivered records a delivery report, and marks the conditions only the
// hub can report: awaited from its agent, or unknowable without one.
func setDelivered(cs fleet.Conditions, r fleet.DeliveryReport, gen int64, now time.Time) fleet.Conditions {
	if r.Done {
		cs = cs.MarkTrue(fleet.ConditionDelivered, r.Reason, r.Message, gen, now)
	} else {
		cs = cs.MarkFalse(fleet.ConditionDelivered, r.Reason, r.Message, gen, now)
	}
	for _, t := range []string{fleet.ConditionJoined, fleet.ConditionAvailable} {
		c, ok := cs.Get(t)
		switch {
		case r.NoAgent:
			cs = cs.MarkUnknown(t, fleet.ReasonNoAgentOnHub,
				"the hub runs no agent (SyncSet delivery), so nothing reports this cluster's state", gen, now)
		case !ok || c.Reason == fleet.ReasonNoAgentOnHub:
			cs = cs.MarkUnknown(t, fleet.ReasonAwaitingAgent, "the hub has not reported this cluster yet", gen, now)
		}
	}
	return cs
}

func supportedModes(deliveries map[fleet.DeliveryMode]fleet.Delivery) []fleet.DeliveryMode {
	return slices.Sorted(maps.Keys(deliveries))
}
