package onpostgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// placedCounts reads, per hub, the recorded placed count and the number of
// live registrations that point at it.
func placedCounts(t *testing.T, e *env) map[string][2]int {
	t.Helper()
	hubs, _, err := e.store.ListHubs(context.Background(), fleet.ListQuery{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int{}
	for _, h := range hubs {
		_, total, err := e.store.ListRegistrations(context.Background(), caller.OrgID, fleet.ListQuery{Size: 1, Search: "hub_id = '" + h.ID + "'"})
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = [2]int{h.PlacedCount, total}
	}
	return out
}

func registerMany(t *testing.T, e *env, n int, zone string) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			reg, _, err := e.store.CreateRegistration(context.Background(), caller,
				fleet.RegistrationCreate{Name: fmt.Sprintf("c-%04d", i), Zone: zone, Product: fleet.ProductROSA}, "")
			if err != nil {
				t.Errorf("CreateRegistration(%d): %v", i, err)
			}
			ids[i] = reg.ID
		}()
	}
	wg.Wait()
	return ids
}

// countPhases counts live registrations of caller's org per phase.
func countPhases(t *testing.T, e *env) map[fleet.Phase]int {
	t.Helper()
	regs, _, err := e.store.ListRegistrations(context.Background(), caller.OrgID, fleet.ListQuery{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[fleet.Phase]int{}
	for _, r := range regs {
		out[r.Phase]++
	}
	return out
}

// countDelivered counts live registrations whose Delivered condition is True.
func countDelivered(t *testing.T, e *env) int {
	t.Helper()
	regs, _, err := e.store.ListRegistrations(context.Background(), caller.OrgID, fleet.ListQuery{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	for _, r := range regs {
		if r.Conditions.IsTrue(fleet.ConditionDelivered) {
			delivered++
		}
	}
	return delivered
}

// TestTwoReplicasOverAThousandRegistrations runs two replicas (separate
// pools, listeners and claim owners) over 1,000 registrations: each is placed
// exactly once, no hub exceeds its capacity, all reach the right phase, and
// all are gone after deregistration.
// fleetDeadline bounds each step over the thousand registrations. It is a
// deadline, not a speed target: a slow CI machine running the other
// packages' tests beside this one takes far longer than a quiet one (the
// speed is measured by make bench, docs/performance.md).
const fleetDeadline = 5 * time.Minute

func TestTwoReplicasOverAThousandRegistrations(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newEnv(t)
	hubs := []fleet.Hub{e.hub("hub-a", "eu", "eu-west-1", 400), e.hub("hub-b", "eu", "eu-west-1", 400), e.hub("hub-c", "eu", "eu-central-1", 400)}
	e.startReplica(replicaOptions{})
	e.startReplica(replicaOptions{})
	start := time.Now()
	registerMany(t, e, 1000, "eu")
	t.Logf("registered 1000 in %s", time.Since(start))

	g.Eventually(func() map[fleet.Phase]int { return countPhases(t, e) }).WithTimeout(fleetDeadline).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(map[fleet.Phase]int{fleet.PhaseProvisioning: 1000}), "every registration placed and published")
	t.Logf("placed and published 1000 in %s", time.Since(start))
	sum := 0
	for name, c := range placedCounts(t, e) {
		if c[0] != c[1] || c[0] > 400 {
			t.Errorf("hub %s: placed count %d, registrations on it %d; want equal and at most 400", name, c[0], c[1])
		}
		sum += c[0]
	}
	if sum != 1000 {
		t.Errorf("placements = %d, want 1000 (each registration placed exactly once)", sum)
	}
	for _, h := range hubs {
		e.ackAll(h)
	}
	g.Eventually(func() int { return countDelivered(t, e) }).WithTimeout(fleetDeadline).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(1000), "every registration delivered after the agents acknowledged")
	regs, _, _ := e.store.ListRegistrations(context.Background(), caller.OrgID, fleet.ListQuery{Size: 1000})
	for _, r := range regs {
		if _, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	g.Eventually(func() map[fleet.Phase]int { return countPhases(t, e) }).WithTimeout(fleetDeadline).WithPolling(200 * time.Millisecond).
		Should(gomega.Equal(map[fleet.Phase]int{fleet.PhaseDeleting: 1000}))
	for _, h := range hubs {
		e.ackAll(h)
	}
	g.Eventually(func() map[fleet.Phase]int { return countPhases(t, e) }).WithTimeout(fleetDeadline).WithPolling(200 * time.Millisecond).
		Should(gomega.BeEmpty())
	for name, c := range placedCounts(t, e) {
		if c != [2]int{0, 0} {
			t.Errorf("hub %s after deregistration: %v, want no placements", name, c)
		}
	}
}

func TestCapacityIsNeverExceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-small", "eu", "eu-west-1", 30)
	e.hub("hub-tiny", "eu", "eu-west-1", 20)
	cfg := defaultReconcileConfig()
	cfg.Workers, cfg.BatchSize = 16, 25
	registerMany(t, e, 200, "eu")
	e.startReplica(replicaOptions{cfg: cfg})
	e.startReplica(replicaOptions{cfg: cfg})
	gomega.NewWithT(t).Eventually(func() map[fleet.Phase]int { return countPhases(t, e) }).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).
		Should(gomega.Equal(map[fleet.Phase]int{fleet.PhaseProvisioning: 50, fleet.PhaseAccepted: 150}))
	for name, c := range placedCounts(t, e) {
		want := map[string]int{"hub-small": 30, "hub-tiny": 20}[name]
		if c != [2]int{want, want} {
			t.Errorf("hub %s: placed %v, want %d (its capacity)", name, c, want)
		}
	}
}

// blockingDelivery enters, signals, and waits for its context to end: a
// replica that dies in the middle of delivering.
type blockingDelivery struct{ entered chan string }

func (b blockingDelivery) Deliver(ctx context.Context, _ fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	b.entered <- reg.ID
	<-ctx.Done()
	return fleet.DeliveryReport{}, ctx.Err()
}

func (b blockingDelivery) Withdraw(ctx context.Context, h fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	return b.Deliver(ctx, h, reg)
}

func TestKilledReplicaIsTakenOverAfterTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-eu", "eu", "eu-west-1", 5)
	cfg := defaultReconcileConfig()
	cfg.Lease = 2 * time.Second
	entered := make(chan string, 10)
	dying := e.startReplica(replicaOptions{cfg: cfg, deliveries: func(*postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: blockingDelivery{entered: entered}}
	}})
	reg := e.register("orphan", "eu", "")
	<-entered
	claimedAt := time.Now()
	dying.stop() // context cancelled after claiming: the claim stays until its lease ends
	e.startReplica(replicaOptions{cfg: cfg})
	reg = e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished), "taken over")
	if waited := time.Since(claimedAt); waited < cfg.Lease-200*time.Millisecond {
		t.Errorf("taken over after %s, before the %s lease ended", waited, cfg.Lease)
	}
	if c, _ := reg.Conditions.Get(fleet.ConditionPlaced); c.Status != fleet.ConditionTrue {
		t.Errorf("taken-over registration: %s", describe(reg))
	}
	if counts := placedCounts(t, e); counts["hub-eu"] != [2]int{1, 1} {
		t.Errorf("hub-eu placements after takeover = %v, want exactly one", counts["hub-eu"])
	}
}
