package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// ProvisioningManager places accepted registrations on a hub and delivers
// them there (provisioning_mgr). It works a claimed batch at once: one
// placement per zone, one delivery per hub whose delivery mode delivers in
// batches (fleet.BatchDelivery), and one record of all the outcomes.
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
		logger: logger.With("reconciler", "provisioning_mgr"), metrics: metrics, reconcileBatch: m.reconcileBatch,
		// A batch a pass: the next claim takes the acknowledged first, as
		// many as a batch holds, as when the heartbeats woke them all.
		wakeAcknowledged: cfg.BatchSize,
	}
	return m
}

// Run reconciles until ctx ends, woken by wake.
func (m *ProvisioningManager) Run(ctx context.Context, wake <-chan string) {
	loop(ctx, m.name, wake, m.cfg.Resync, m.pass)
}

// reconcileBatch observes where each claimed registration stands and takes
// its next step: place it, then deliver its current generation. It returns
// one outcome per claim, in order; one whose step never got an answer from
// the database, or did not end, carries errPassUnfinished or unavailability.
func (m *ProvisioningManager) reconcileBatch(ctx context.Context, claims []fleet.Claim) []fleet.Outcome {
	now := m.clock.Now()
	outs := make([]fleet.Outcome, len(claims))
	for i, c := range claims {
		outs[i] = fleet.Outcome{ID: c.Registration.ID, Conditions: c.Registration.Conditions, ObservedGeneration: c.Registration.Generation,
			Err: errPassUnfinished}
	}
	hubs, onHub := map[string]fleet.Hub{}, map[string][]int{}
	for i, p := range m.place(ctx, claims) {
		reg := claims[i].Registration
		switch {
		case p.Err != nil:
			outs[i].Err = p.Err
		case p.Hub == nil:
			outs[i].Err = nil
			outs[i].Conditions = outs[i].Conditions.MarkFalse(fleet.ConditionPlaced, fleet.ReasonNoHubAvailable,
				fmt.Sprintf("no ready, uncordoned hub with room in zone %s; retried when hubs change", reg.Zone), reg.Generation, now)
			outs[i].RequeueAfter = m.cfg.Recheck
		default:
			outs[i].Conditions = outs[i].Conditions.MarkTrue(fleet.ConditionPlaced, fleet.ReasonHubSelected,
				fmt.Sprintf("placed on hub %s (zone %s, region %s)", p.Hub.Name, p.Hub.Zone, p.Hub.Region), reg.Generation, now)
			hubs[p.Hub.ID] = *p.Hub
			onHub[p.Hub.ID] = append(onHub[p.Hub.ID], i)
		}
	}
	m.deliverAll(ctx, claims, outs, hubs, onHub, now)
	return outs
}

// place places the batch, trying again the zones the database did not answer
// for, until it does or ctx ends.
func (m *ProvisioningManager) place(ctx context.Context, claims []fleet.Claim) []fleet.Placement {
	out := make([]fleet.Placement, len(claims))
	pending := make([]int, len(claims))
	for i := range claims {
		pending[i] = i
	}
	for {
		batch := make([]fleet.Claim, len(pending))
		for k, i := range pending {
			batch[k] = claims[i]
		}
		placed, err := m.queue.PlaceRegistrations(ctx, batch, supportedModes(m.deliveries))
		var again []int
		for k, i := range pending {
			p := fleet.Placement{ID: claims[i].Registration.ID, Err: err}
			if err == nil {
				p = placed[k]
			}
			out[i] = p
			if fleet.ErrorCodeOf(p.Err) == fleet.CodeUnavailable {
				again = append(again, i)
			}
		}
		if len(again) == 0 || ctx.Err() != nil {
			return out
		}
		pending = again
		select {
		case <-ctx.Done():
			return out
		case <-time.After(unavailableRetry):
		}
	}
}

// deliverAll delivers the placed registrations, Workers deliveries at a
// time: a hub's whole share of the batch at once where its delivery mode
// delivers in batches, one registration at a time elsewhere.
func (m *ProvisioningManager) deliverAll(ctx context.Context, claims []fleet.Claim, outs []fleet.Outcome, hubs map[string]fleet.Hub,
	onHub map[string][]int, now time.Time) {
	sem := make(chan struct{}, m.cfg.Workers)
	var wg sync.WaitGroup
	// A delivery whose turn comes after the pass's deadline is not started:
	// its registrations, placed, are recorded as due again at once (deferred),
	// so that the next pass delivers them instead of their claims lapsing.
	run := func(what string, idx []int, work func()) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			defer logPanic(m.logger, what)
			if ctx.Err() != nil {
				for _, i := range idx {
					outs[i].Err, outs[i].RequeueAfter = nil, deferredDelivery
				}
				return
			}
			work()
		})
	}
	for _, hubID := range slices.Sorted(maps.Keys(onHub)) {
		hub, idx := hubs[hubID], onHub[hubID]
		delivery, ok := m.deliveries[hub.DeliveryMode]
		if !ok {
			for _, i := range idx {
				reg := claims[i].Registration
				outs[i].Err = nil
				outs[i].Conditions = outs[i].Conditions.MarkUnknown(fleet.ConditionDelivered, fleet.ReasonDeliveryPending,
					fmt.Sprintf("this deployment cannot deliver to %s hubs", hub.DeliveryMode), reg.Generation, now)
				outs[i].RequeueAfter = m.cfg.Resync
			}
			continue
		}
		if batch, ok := delivery.(fleet.BatchDelivery); ok {
			run("hub "+hub.Name, idx, func() { m.deliverBatch(ctx, batch, hub, claims, idx, outs, now) })
			continue
		}
		for _, i := range idx {
			run(claims[i].Registration.ID, []int{i}, func() {
				reg := claims[i].Registration
				report, err := untilAnswered(ctx, func(ctx context.Context) (fleet.DeliveryReport, error) {
					return delivery.Deliver(ctx, hub, reg)
				})
				outs[i] = m.delivered(ctx, hub, reg, outs[i], report, err, now)
			})
		}
	}
	wg.Wait()
}

// deferredDelivery is when a placed registration whose delivery did not fit
// in its pass is due again: at once, behind the work already due.
const deferredDelivery = time.Millisecond

// deliverBatch delivers the registrations idx of the batch, all on hub, with
// one call of its batch delivery.
func (m *ProvisioningManager) deliverBatch(ctx context.Context, delivery fleet.BatchDelivery, hub fleet.Hub, claims []fleet.Claim,
	idx []int, outs []fleet.Outcome, now time.Time) {
	regs := make([]fleet.Registration, len(idx))
	for k, i := range idx {
		regs[k] = claims[i].Registration
	}
	results, err := untilAnswered(ctx, func(ctx context.Context) ([]fleet.DeliveryResult, error) {
		return delivery.DeliverBatch(ctx, hub, regs)
	})
	for k, i := range idx {
		r := fleet.DeliveryResult{Err: err}
		if err == nil {
			r = results[k]
		}
		outs[i] = m.delivered(ctx, hub, regs[k], outs[i], r.Report, r.Err, now)
	}
}

// delivered completes the outcome of a registration placed on hub with its
// delivery's report: the conditions, when to look again, and the delivery
// mode that now holds its objects.
func (m *ProvisioningManager) delivered(ctx context.Context, hub fleet.Hub, reg fleet.Registration, out fleet.Outcome,
	report fleet.DeliveryReport, err error, now time.Time) fleet.Outcome {
	out.Err = err
	if err != nil {
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
	return m.handOff(ctx, hub, reg, out, now)
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
