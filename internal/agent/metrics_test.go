package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// TestDesiredMetricsFollowTheLongPoll: a failed long-poll counts as an
// error, the answers after it as successes, and the revision the fleet
// manager sent and the one applied are both exported, the alerts'
// fleetshard_sync_desired_polls_total, _revision and _applied_revision.
func TestDesiredMetricsFollowTheLongPoll(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	f := newFakeFleet(t)
	cfg := DefaultConfig()
	cfg.PollWait = 2 * time.Second
	cfg.FleetManagerURL, cfg.HubID = f.URL(), f.hubID
	fc, _ := newTestFleetClient(t, f, cfg)
	hub := &Hub{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		managedClusterGVR: "ManagedClusterList", namespaceGVR: "NamespaceList", hubkind.PlacementBinding.GVR(): "PlacementBindingList",
		hubkind.Placement.GVR(): "PlacementList", hubkind.Policy.GVR(): "PolicyList",
		clusterDeploymentGVR: "ClusterDeploymentList", clusterImageSetGVR: "ClusterImageSetList", machinePoolGVR: "MachinePoolList",
	})}
	a := New(cfg, fc, hub, Options{Version: "v-test", StartGeneration: 1, Logger: testLogger(), Metrics: newTestMetrics(t), Clock: &fixedClock{t: time.Now()}})
	f.failNext("getHubDesired", 1)
	rev := f.setDesired(private.DesiredRegistration{RegistrationId: "r-1", Generation: 1, Objects: []json.RawMessage{}})
	done := make(chan struct{})
	go func() { a.runDesired(t.Context()); close(done) }()
	t.Cleanup(func() { <-done })

	g.Eventually(func() []float64 {
		return []float64{testutil.ToFloat64(a.metrics.desiredRevision), testutil.ToFloat64(a.metrics.appliedRevision)}
	}).WithTimeout(20*time.Second).Should(gomega.Equal([]float64{float64(rev), float64(rev)}), "desired and applied revision")
	g.Expect(testutil.ToFloat64(a.metrics.polls.WithLabelValues(outcomeError))).To(gomega.Equal(1.0), "long-polls failed")
	g.Expect(testutil.ToFloat64(a.metrics.polls.WithLabelValues(outcomeSuccess))).To(gomega.BeNumerically(">=", 1), "long-polls answered")
}

// TestHeartbeatExportsTheAnnouncedRevision: a heartbeat's answer sets the
// revision the fleet manager holds for the hub, while the applied one stays
// where it was: the difference is the alert's backlog.
func TestHeartbeatExportsTheAnnouncedRevision(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	a := newTestAgent(t, f, newFakeHub(), DefaultConfig(), &fixedClock{t: time.Now()})
	rev := f.setDesired()
	a.heartbeat(t.Context())
	if got := testutil.ToFloat64(a.metrics.desiredRevision); got != float64(rev) {
		t.Errorf("fleetshard_sync_desired_revision after a heartbeat = %v, want %d", got, rev)
	}
	if got := testutil.ToFloat64(a.metrics.appliedRevision); got != 0 {
		t.Errorf("fleetshard_sync_desired_applied_revision with nothing applied = %v, want 0", got)
	}
	if got := testutil.ToFloat64(a.metrics.heartbeats.WithLabelValues(outcomeSuccess)); got != 1 {
		t.Errorf("fleetshard_sync_heartbeats_total{outcome=success} = %v, want 1", got)
	}
}
