package onpostgres_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
)

// fakeSyncSets plays a SyncSet delivery mode in memory, so these tests check
// what the reconcilers do with its reports; the real OCM and Hive deliveries
// are tested against their APIs in internal/syncset.
type fakeSyncSets struct {
	mu       sync.Mutex
	held     map[string]bool // registration id → its SyncSet exists
	released map[string]bool // registration id → let go, objects left on the hub
	failures []error         // returned by the next calls, in order
}

func newFakeSyncSets() *fakeSyncSets {
	return &fakeSyncSets{held: map[string]bool{}, released: map[string]bool{}}
}

func (f *fakeSyncSets) failNext(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, errs...)
}

func (f *fakeSyncSets) nextFailure() error {
	if len(f.failures) == 0 {
		return nil
	}
	err := f.failures[0]
	f.failures = f.failures[1:]
	return err
}

func (f *fakeSyncSets) Deliver(_ context.Context, _ fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.nextFailure(); err != nil {
		return syncset.Failed(err)
	}
	f.held[reg.ID] = true
	return fleet.DeliveryReport{Done: true, NoAgent: true, Reason: fleet.ReasonSyncSetApplied, Message: "applied"}, nil
}

func (f *fakeSyncSets) Withdraw(_ context.Context, _ fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.nextFailure(); err != nil {
		return syncset.Failed(err)
	}
	delete(f.held, reg.ID)
	return fleet.DeliveryReport{Done: true, NoAgent: true, Reason: fleet.ReasonSyncSetDeleted, Message: "deleted"}, nil
}

func (f *fakeSyncSets) Release(_ context.Context, _ fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.nextFailure(); err != nil {
		return syncset.Failed(err)
	}
	delete(f.held, reg.ID)
	f.released[reg.ID] = true
	return fleet.DeliveryReport{Done: true, NoAgent: true, Reason: fleet.ReasonHandingOff, Message: "released"}, nil
}

func (f *fakeSyncSets) state(id string) (held, released bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[id], f.released[id]
}

// syncSetEnv is a replica that delivers to agent and syncset-hive hubs, the
// latter through fake.
func (e *env) startSyncSetReplica(fake *fakeSyncSets) {
	e.t.Helper()
	e.startReplica(replicaOptions{deliveries: func(store *postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: postgres.NewAgentDelivery(store), fleet.DeliverySyncSetHive: fake}
	}})
}

func (e *env) hiveHub(name, zone string) fleet.Hub {
	e.t.Helper()
	h, err := e.store.CreateHub(context.Background(), fleet.HubCreate{Name: name, Zone: zone, Region: zone + "-1",
		DeliveryMode: fleet.DeliverySyncSetHive, Capacity: 10, Hive: &fleet.HiveTarget{Namespace: name, ClusterDeployment: name},
		Credentials: map[string]string{fleet.CredentialHiveKubeconfig: "kubeconfig of the Hive cluster"}})
	if err != nil {
		e.t.Fatalf("CreateHub(%s): %v", name, err)
	}
	return h
}

func TestSyncSetHubRegistrationIsReadyWithoutAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := newFakeSyncSets()
	e.hiveHub("hive-1", "eu")
	e.startSyncSetReplica(fake)
	reg := e.register("c1", "eu", "")
	got := e.eventually(reg.ID, 10*time.Second, func(r fleet.Registration) bool { return r.Phase == fleet.PhaseReady }, "ready")
	g := gomega.NewWithT(t)
	for _, typ := range []string{fleet.ConditionJoined, fleet.ConditionAvailable} {
		c, _ := got.Conditions.Get(typ)
		g.Expect(c.Status).To(gomega.Equal(fleet.ConditionUnknown), typ)
		g.Expect(c.Reason).To(gomega.Equal(fleet.ReasonNoAgentOnHub), typ)
	}
	g.Expect(got.Conditions.Reason(fleet.ConditionDelivered)).To(gomega.Equal(fleet.ReasonSyncSetApplied))
	g.Expect(got.DeliveredVia).To(gomega.Equal(fleet.DeliverySyncSetHive))
	held, _ := fake.state(reg.ID)
	g.Expect(held).To(gomega.BeTrue())

	if _, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, reg.ID); err != nil {
		t.Fatal(err)
	}
	e.eventuallyGone(reg.ID)
	held, _ = fake.state(reg.ID)
	g.Expect(held).To(gomega.BeFalse(), "the SyncSet outlived its registration")
}

func TestSyncSetAPIFailuresAreReportedThenRetriedOrNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := newFakeSyncSets()
	e.hiveHub("hive-1", "eu")
	unavailable := &syncset.APIError{Mode: fleet.DeliverySyncSetHive, Op: syncset.OpApply, Status: http.StatusServiceUnavailable, Reason: "etcd is down"}
	fake.failNext(unavailable, unavailable)
	e.startSyncSetReplica(fake)

	// 5xx: Delivered False with the API's words, retried with backoff until it passes.
	retried := e.register("c1", "eu", "")
	e.eventually(retried.ID, 10*time.Second, func(r fleet.Registration) bool { return r.Phase == fleet.PhaseReady }, "ready after the API recovered")

	// Any other 4xx: DeliveryFailed, the failed phase, no retry before the resync.
	forbidden := &syncset.APIError{Mode: fleet.DeliverySyncSetHive, Op: syncset.OpApply, Status: http.StatusForbidden, Reason: "syncsets.hive.openshift.io is forbidden"}
	fake.failNext(forbidden, forbidden, forbidden)
	rejected := e.register("c2", "eu", "")
	got := e.eventually(rejected.ID, 10*time.Second, func(r fleet.Registration) bool { return r.Phase == fleet.PhaseFailed }, "failed")
	c, _ := got.Conditions.Get(fleet.ConditionDelivered)
	g := gomega.NewWithT(t)
	g.Expect(c.Reason).To(gomega.Equal(fleet.ReasonDeliveryFailed))
	g.Expect(c.Message).To(gomega.ContainSubstring("forbidden"))
	// Not hammered: the two failures left stay queued until the resync.
	g.Consistently(func() int { fake.mu.Lock(); defer fake.mu.Unlock(); return len(fake.failures) }).
		WithTimeout(time.Second).WithPolling(50 * time.Millisecond).Should(gomega.Equal(2))
}

func TestHubMovesFromSyncSetToAgentWithoutRemovingObjects(t *testing.T) {
	t.Parallel()
	e, fake, reg, moved := startHandOff(t)
	held, released := fake.state(reg.ID)
	g := gomega.NewWithT(t)
	g.Expect(held).To(gomega.BeTrue(), "the SyncSet went before the agent held the objects")
	g.Expect(released).To(gomega.BeFalse())

	e.ackAll(moved)
	got := e.eventually(reg.ID, 10*time.Second, func(r fleet.Registration) bool { return r.DeliveredVia == fleet.DeliveryAgent }, "handed over to the agent")
	held, released = fake.state(reg.ID)
	g.Expect(held).To(gomega.BeFalse())
	g.Expect(released).To(gomega.BeTrue(), "the SyncSet was withdrawn, not released")
	g.Expect(got.Conditions.Reason(fleet.ConditionDelivered)).To(gomega.Equal(fleet.ReasonAcknowledged))
	g.Expect(got.Conditions.Reason(fleet.ConditionJoined)).To(gomega.Equal(fleet.ReasonAwaitingAgent))
	g.Expect(got.Phase).To(gomega.Equal(fleet.PhaseProvisioning))
}

func TestDeregistrationDuringHandOffWithdrawsFromBothModes(t *testing.T) {
	t.Parallel()
	e, fake, reg, moved := startHandOff(t)
	if _, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, reg.ID); err != nil {
		t.Fatal(err)
	}
	e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonWithdrawing), "withdrawing from the agent")
	e.ackAll(moved)
	e.eventuallyGone(reg.ID)
	held, released := fake.state(reg.ID)
	g := gomega.NewWithT(t)
	g.Expect(held).To(gomega.BeFalse(), "the SyncSet outlived its registration")
	g.Expect(released).To(gomega.BeFalse())
}

// eventuallyGone waits until the registration is deleted (no longer found).
func (e *env) eventuallyGone(id string) {
	e.t.Helper()
	gomega.NewWithT(e.t).Eventually(func() fleet.ErrorCode {
		_, err := e.find(id)
		return fleet.ErrorCodeOf(err)
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(fleet.CodeNotFound), "registration %s was never deleted", id)
}

// startHandOff readies a registration on a syncset-hive hub, moves the hub to
// its agent, and returns once the agent's delivery has published it: the
// agent has not acknowledged, so nothing may be released yet.
func startHandOff(t *testing.T) (*env, *fakeSyncSets, fleet.Registration, fleet.Hub) {
	t.Helper()
	e := newEnv(t)
	fake := newFakeSyncSets()
	hub := e.hiveHub("hive-1", "eu")
	e.startSyncSetReplica(fake)
	reg := e.register("c1", "eu", "")
	e.eventually(reg.ID, 10*time.Second, func(r fleet.Registration) bool { return r.Phase == fleet.PhaseReady }, "ready")
	mode, identity := fleet.DeliveryAgent, "hive-1-agent"
	moved, err := e.store.UpdateHub(context.Background(), hub.ID, nil, fleet.HubUpdate{DeliveryMode: &mode, AgentIdentity: &identity})
	if err != nil {
		t.Fatal(err)
	}
	e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished), "published to the agent")
	return e, fake, reg, moved
}
