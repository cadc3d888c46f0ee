package onpostgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startReplica(replicaOptions{})
	hub := e.hub("hub-eu-1", "eu", "eu-west-1", 10)
	reg := e.register("alpha", "eu", "eu-west-1")
	if reg.Phase != fleet.PhaseAccepted || !reg.Conditions.IsTrue(fleet.ConditionAccepted) {
		t.Errorf("new registration = %s, want accepted", describe(reg))
	}

	reg = e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished), "published")
	if reg.Hub == nil || reg.Hub.ID != hub.ID || reg.Hub.Zone != "eu" || reg.Phase != fleet.PhaseProvisioning {
		t.Errorf("published registration = %+v %s, want placed on %s and provisioning", reg.Hub, describe(reg), hub.Name)
	}
	e.ackAll(hub)
	reg = e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionTrue, fleet.ReasonAcknowledged), "delivered")
	if reg.Conditions.Status(fleet.ConditionJoined) != fleet.ConditionUnknown || reg.ObservedGeneration != reg.Generation {
		t.Errorf("delivered registration = %s, gen %d/%d; want Joined Unknown and observed", describe(reg), reg.ObservedGeneration, reg.Generation)
	}

	// A label change is delivered again.
	labels := map[string]string{"env": "prod"}
	if _, err := e.store.UpdateRegistration(context.Background(), fleet.Permitted, caller.OrgID, reg.ID, &reg.Generation, fleet.RegistrationUpdate{Labels: &labels}); err != nil {
		t.Fatalf("UpdateRegistration(): %v", err)
	}
	e.eventually(reg.ID, 5*time.Second, func(r fleet.Registration) bool {
		return r.ObservedGeneration == 2 && cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished)(r)
	}, "republished generation 2")
	e.ackAll(hub)
	e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionTrue, ""), "delivered generation 2")

	// Deregistration: withdrawn, confirmed by the agent, gone.
	if _, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, reg.ID); err != nil {
		t.Fatalf("RequestRegistrationDeletion(): %v", err)
	}
	if again, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, reg.ID); err != nil || again.DeletionRequestedAt == nil {
		t.Errorf("a repeated deletion = %v, %v; want harmless", again.Phase, err)
	}
	e.eventually(reg.ID, 5*time.Second, func(r fleet.Registration) bool { return r.Phase == fleet.PhaseDeleting }, "deleting")
	e.ackAll(hub)
	gomegaGone(t, e, reg.ID)
	if h, _ := e.store.FindHub(context.Background(), hub.ID); h.PlacedCount != 0 {
		t.Errorf("hub placed count after deregistration = %d, want 0", h.PlacedCount)
	}
}

func gomegaGone(t *testing.T, e *env, id string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() fleet.ErrorCode {
		_, err := e.find(id)
		return fleet.ErrorCodeOf(err)
	}).WithTimeout(5*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(fleet.CodeNotFound),
		"registration %s still found after deregistration", id)
}

// ackingDelivery publishes like the agent delivery, then has the agent
// acknowledge before the pass ends: the wake-up lands while the claim holds.
type ackingDelivery struct {
	fleet.Delivery
	ack func(fleet.Hub)
}

func (d ackingDelivery) Deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	report, err := d.Delivery.Deliver(ctx, hub, reg)
	d.ack(hub)
	return report, err
}

// TestWakeUpDuringAPassIsNotLost: an acknowledgement that arrives while the
// registration is claimed makes it due again at once, not at the next resync.
func TestWakeUpDuringAPassIsNotLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-eu", "eu", "eu-west-1", 5)
	e.startReplica(replicaOptions{deliveries: func(store *postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: ackingDelivery{Delivery: postgres.NewAgentDelivery(store), ack: e.ackAll}}
	}})
	reg := e.register("racy", "eu", "")
	// The resync is minutes away: only the wake-up can make this in time.
	e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionTrue, fleet.ReasonAcknowledged), "delivered")
}
