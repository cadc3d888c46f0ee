package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

// startAgentAs starts an agent of f's hub on the test hub as acct, reaching
// the hub through a kubeconfig file as in a deployment, with the start
// generation gen (which its heartbeats carry). stop ends it and returns what
// Run returned; the test's end stops it too.
func startAgentAs(t *testing.T, f *fakeFleet, acct agentAccount, gen int64, tweaks ...func(*Config)) (a *Agent, stop func() error) {
	t.Helper()
	restCfg, err := HubRESTConfig(acct.kubeconfig(t), "fleetshard-sync/test")
	if err != nil {
		t.Fatal(err)
	}
	hub, err := NewHub(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PollWait, cfg.HeartbeatInterval, cfg.InventoryBatchDelay, cfg.DeletionTimeout = 2*time.Second, time.Second, 50*time.Millisecond, 30*time.Second
	cfg.FleetManagerURL, cfg.HubID = f.URL(), f.hubID
	useAccount(&cfg, acct)
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	fc, _ := newTestFleetClient(t, f, cfg)
	a = New(cfg, fc, hub, Options{Version: "v-test", StartGeneration: gen, Identity: fmt.Sprintf("agent-%d", gen),
		Logger: testLogger(), Metrics: newTestMetrics(t), Clock: wallClock{}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(30 * time.Second):
				result = fmt.Errorf("Run() did not return within 30s of its context ending")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return a, stop
}

// heartbeatsOf returns the revisions the heartbeats of the agent started
// with generation gen acknowledged.
func heartbeatsOf(f *fakeFleet, gen int64) []int64 {
	var revs []int64
	for _, hb := range f.heartbeats() {
		if hb.AgentStartGeneration == gen {
			revs = append(revs, hb.AppliedRevision)
		}
	}
	return revs
}

// TestOneAgentOfAHubActsAtATime runs two agents of one hub under the
// template's account, as two pods that overlap after a node loss: the one
// holding the lease applies and reports, the other waits, also while the
// leader renews; when the leader stops, it releases the lease and the other
// takes over at once, without waiting for the lease to run out.
func TestOneAgentOfAHubActsAtATime(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	admin := hubtest.Start(t).NewDynamicFor(t)
	leases := hubtest.Start(t).NewClientsetFor(t).CoordinationV1().Leases
	acct := deployAgentAccount(t)
	f := newFakeFleetFor(t, uniqueHubID("hub"))
	holder := func() string {
		l, err := leases(acct.namespace).Get(ctx, acct.name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	// A lease far longer than the test waits: the takeover comes from the
	// leader's release, not from the lease running out.
	longLease := func(c *Config) { c.LeaseDuration = 10 * time.Minute }
	const genA, genB = 1001, 2002
	first, stopFirst := startAgentAs(t, f, acct, genA, longLease)
	g.Eventually(holder).WithTimeout(30 * time.Second).Should(gomega.Equal("agent-1001"))
	second, stopSecond := startAgentAs(t, f, acct, genB, longLease)

	suffix := fmt.Sprintf("%012x", time.Now().UnixNano())[:12]
	reg := fleet.Registration{ID: "1eade700-0000-4000-8000-" + suffix, OrgID: "org-1", Name: "lease"}
	rev := f.setDesired(desiredRegistration(t, reg, f.hubID, nil))
	g.Eventually(func() []int64 { return heartbeatsOf(f, genA) }).WithTimeout(30 * time.Second).Should(gomega.ContainElement(rev))
	// The leader keeps the lease past its renew deadline (it may renew it),
	// and the standby has done nothing all along.
	l, err := leases(acct.namespace).Get(ctx, acct.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	acquired := l.Spec.AcquireTime.Time
	g.Eventually(func() time.Time {
		l, err := leases(acct.namespace).Get(ctx, acct.name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil || *l.Spec.HolderIdentity != "agent-1001" {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}).WithTimeout(30*time.Second).Should(gomega.BeTemporally(">", acquired.Add(first.cfg.LeaseRenewDeadline+time.Second)), "the leader's renewals")
	if got := heartbeatsOf(f, genB); len(got) > 0 {
		t.Errorf("heartbeats of the standby = %v, want none", got)
	}
	if err := second.Ready(ctx); err == nil {
		t.Errorf("standby Ready() = nil, want an error: it does not act on the hub")
	}
	if err := first.Ready(ctx); err != nil {
		t.Errorf("leader Ready() = %v, want nil", err)
	}

	// The leader stops (its pod is deleted): the standby takes over and
	// applies the next set itself.
	if err := stopFirst(); err != nil {
		t.Fatalf("leader Run() = %v, want nil", err)
	}
	g.Eventually(holder).WithTimeout(30 * time.Second).Should(gomega.Equal("agent-2002"))
	reg.Labels = map[string]string{"taken": "over"}
	rev = f.setDesired(desiredRegistration(t, reg, f.hubID, nil))
	g.Eventually(func() []int64 { return heartbeatsOf(f, genB) }).WithTimeout(30 * time.Second).Should(gomega.ContainElement(rev))
	mc, err := get(ctx, admin, managedClusterGVR, "", fleet.ManagedClusterName(reg))
	if err != nil || mc.GetLabels()["taken"] != "over" {
		t.Errorf("ManagedCluster after the takeover = %v, %v; want it labelled taken=over by the new leader", mc, err)
	}
	if slices.Contains(heartbeatsOf(f, genA), rev) {
		t.Errorf("the stopped agent acknowledged revision %d", rev)
	}
	if err := stopSecond(); err != nil {
		t.Errorf("new leader Run() = %v, want nil", err)
	}
}

// TestAgentStopsActingWhenItLosesTheLease takes the lease from a running
// agent, as a partition would let another agent do: it cannot renew, stops
// its loops within its renew deadline, and Run returns ErrLeaseLost, so the
// process exits and its restart waits for the lease.
func TestAgentStopsActingWhenItLosesTheLease(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	leases := hubtest.Start(t).NewClientsetFor(t).CoordinationV1().Leases
	acct := deployAgentAccount(t)
	f := newFakeFleetFor(t, uniqueHubID("hub"))
	a, stop := startAgentAs(t, f, acct, 3003)
	g.Eventually(a.leading.Load).WithTimeout(30 * time.Second).Should(gomega.BeTrue())

	g.Eventually(func() error {
		l, err := leases(acct.namespace).Get(ctx, acct.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		other, long := "another-agent", int32(600)
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &other, &long
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = leases(acct.namespace).Update(ctx, l, metav1.UpdateOptions{})
		return err // a conflict with the agent's renewal: read and try again
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())

	g.Eventually(a.leading.Load).WithTimeout(30 * time.Second).Should(gomega.BeFalse())
	if err := stop(); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run() after the lease was taken = %v, want ErrLeaseLost", err)
	}
	if err := a.Ready(ctx); err == nil {
		t.Errorf("Ready() after the lease was lost = nil, want an error")
	}
}
