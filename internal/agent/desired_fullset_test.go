package agent

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// steppedClock is a clock the test moves while the agent's loops read it.
type steppedClock struct{ nanos atomic.Int64 }

func (c *steppedClock) Now() time.Time { return time.Unix(0, c.nanos.Load()) }

// TestRunDesiredAsksForTheWholeSetAfterTheInterval: after its first whole
// set the agent asks for the changes since the revision it applied, until
// --full-set-interval has passed since that whole set; the next revision
// then comes whole, and deltas follow it again.
func TestRunDesiredAsksForTheWholeSetAfterTheInterval(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	f := newFakeFleet(t)
	cfg := DefaultConfig()
	cfg.FullSetInterval, cfg.PollWait = time.Hour, 2*time.Second
	cfg.FleetManagerURL, cfg.HubID = f.URL(), f.hubID
	fc, _ := newTestFleetClient(t, f, cfg)
	clock := &steppedClock{}
	clock.nanos.Store(time.Now().UnixNano())
	hub := &Hub{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		managedClusterGVR: "ManagedClusterList", namespaceGVR: "NamespaceList", hubkind.PlacementBinding.GVR(): "PlacementBindingList",
		hubkind.Placement.GVR(): "PlacementList", hubkind.Policy.GVR(): "PolicyList",
		clusterDeploymentGVR: "ClusterDeploymentList", clusterImageSetGVR: "ClusterImageSetList", machinePoolGVR: "MachinePoolList",
	})}
	a := New(cfg, fc, hub, Options{Version: "v-test", StartGeneration: 1, Logger: testLogger(), Metrics: newTestMetrics(t), Clock: clock})
	done := make(chan struct{})
	go func() { a.runDesired(t.Context()); close(done) }()
	t.Cleanup(func() { <-done })

	entry := func(id string) private.DesiredRegistration {
		return private.DesiredRegistration{RegistrationId: id, Generation: 1, Objects: []json.RawMessage{}}
	}
	lastSince := func() int64 { s := f.desiredSinces(); return s[len(s)-1] }
	applied := func() int64 { return a.applied.Load() }

	rev1 := f.setDesired(entry("r-1"))
	g.Eventually(applied).WithTimeout(10 * time.Second).Should(gomega.Equal(rev1))
	rev2 := f.setDesired(entry("r-1"), entry("r-2"))
	g.Eventually(applied).WithTimeout(10 * time.Second).Should(gomega.Equal(rev2))
	g.Expect(f.desiredSinces()).To(gomega.ContainElement(rev1), "the second set came as a delta")

	clock.nanos.Add(int64(2 * time.Hour))
	g.Eventually(lastSince).WithTimeout(10*time.Second).Should(gomega.Equal(int64(0)), "past the interval, the next request asks for the whole set")
	rev3 := f.setDesired(entry("r-1"), entry("r-2"), entry("r-3"))
	g.Eventually(applied).WithTimeout(10 * time.Second).Should(gomega.Equal(rev3))
	rev4 := f.setDesired(entry("r-2"), entry("r-3"))
	g.Eventually(applied).WithTimeout(10 * time.Second).Should(gomega.Equal(rev4))
	g.Expect(f.desiredSinces()).To(gomega.ContainElement(rev3), "after the whole set, deltas again")
}

// TestRunDesiredAsksForTheWholeSetInAnotherHistory: the database is restored
// to an earlier revision in a new history, and its revisions pass the
// agent's before the agent hears of it. The next answer is a delta from a
// revision of the agent's number but of the new history's set: the agent
// does not merge it into the set it holds, it asks for the whole set.
func TestRunDesiredAsksForTheWholeSetInAnotherHistory(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	f := newFakeFleet(t)
	f.revisionHistory = "7316.00000001"
	cfg := DefaultConfig()
	cfg.FullSetInterval, cfg.PollWait = time.Hour, 2*time.Second
	cfg.FleetManagerURL, cfg.HubID = f.URL(), f.hubID
	fc, _ := newTestFleetClient(t, f, cfg)
	hub := &Hub{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		managedClusterGVR: "ManagedClusterList", namespaceGVR: "NamespaceList", hubkind.PlacementBinding.GVR(): "PlacementBindingList",
		hubkind.Placement.GVR(): "PlacementList", hubkind.Policy.GVR(): "PolicyList",
		clusterDeploymentGVR: "ClusterDeploymentList", clusterImageSetGVR: "ClusterImageSetList", machinePoolGVR: "MachinePoolList",
	})}
	a := New(cfg, fc, hub, Options{Version: "v-test", StartGeneration: 1, Logger: testLogger(), Metrics: newTestMetrics(t), Clock: &fixedClock{t: time.Now()}})
	done := make(chan struct{})
	go func() { a.runDesired(t.Context()); close(done) }()
	t.Cleanup(func() { <-done })

	entry := func(id string) private.DesiredRegistration {
		return private.DesiredRegistration{RegistrationId: id, Generation: 1, Objects: []json.RawMessage{}}
	}
	applied := func() int64 { return a.applied.Load() }
	f.setDesired(entry("r-1"))
	f.setDesired(entry("r-1"), entry("r-2"))
	rev3 := f.setDesired(entry("r-1"), entry("r-2"), entry("r-3"))
	g.Eventually(applied).WithTimeout(10 * time.Second).Should(gomega.Equal(rev3))
	requests := len(f.desiredSinces())

	// Restored to revision 1, then two registrations and a third revision
	// in the new history before the agent asks again.
	f.restore(1, "7316.00000002", []private.DesiredRegistration{entry("r-1"), entry("r-4")},
		[]private.DesiredRegistration{entry("r-1"), entry("r-4"), entry("r-5")},
		[]private.DesiredRegistration{entry("r-1"), entry("r-4"), entry("r-5"), entry("r-6")})
	g.Eventually(applied).WithTimeout(10 * time.Second).Should(gomega.Equal(rev3 + 1))
	// The fake answered the changes since revision 3 of the new history;
	// merged into the old history's revision 3 they would keep r-2 and r-3
	// and lack r-4 and r-5. The agent asked for the whole set instead.
	g.Expect(f.desiredSinces()[requests:]).To(gomega.ContainElement(int64(0)), "a request for the whole set after the restore")
}

// TestHeartbeatSeesAnotherHistory: a heartbeat answered in another history
// than the applied set's makes the agent fetch the desired set anew, even
// when the revision numbers agree.
func TestHeartbeatSeesAnotherHistory(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	a := newTestAgent(t, f, newFakeHub(), DefaultConfig(), &fixedClock{t: time.Now()})
	rev := f.setDesired()
	old, restored := "7316.00000001", "7316.00000002"
	a.appliedHistory.Store(&old)
	a.applied.Store(rev)
	f.revisionHistory = old
	a.heartbeat(t.Context())
	if got := a.applied.Load(); got != rev {
		t.Errorf("applied revision after a heartbeat in the same history = %d, want %d", got, rev)
	}
	f.restore(rev, restored)
	a.heartbeat(t.Context())
	if got := a.applied.Load(); got != 0 {
		t.Errorf("applied revision after a heartbeat in another history = %d, want 0 (fetch anew)", got)
	}
}
