package syncset_test

// The syncset-ocm tests run ocm-sdk-go's real client against ocmtest.Server,
// a stand-in for OCM implementing the documented contract of its
// clusters_mgmt external-configuration SyncSet endpoints and of Red Hat SSO's
// token endpoint (there is no public OCM to test against). The Source, our own
// interface, is an in-memory fake. No test here starts a hub.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/ocmtest"
)

func TestOCMSyncSetIDFitsOCM(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	g.Expect(e.id()).To(gomega.HavePrefix("ext-"), "the prefix every OCM client gives an external-configuration SyncSet")
	g.Expect(e.id()).To(gomega.HaveLen(36))
	g.Expect(len(e.id())).To(gomega.BeNumerically("<=", 50), "OCM's longest SyncSet id")
	e.deliver(t)
	g.Expect(e.srv.SyncSetIDs(ocmClusterID)).To(gomega.Equal([]string{e.id()}))
}

func TestOCMDeliverCreates(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	report := e.deliver(t)
	g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonSyncSetApplied))
	g.Expect(report.NoAgent).To(gomega.BeTrue())
	g.Expect(report.Message).To(gomega.ContainSubstring(e.id()))
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{
		ocmToken("client_credentials", 200), e.get(404), e.post(201), e.delLegacy(404),
	}))
	got, ok := e.srv.SyncSet(ocmClusterID, e.id())
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(got).To(gomega.Equal(e.wantResources(t)))
}

func TestOCMDeliverUnchangedMakesNoWrite(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t)
	e.srv.ResetCalls()
	report := e.deliver(t)
	g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonSyncSetApplied))
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{e.get(200)}), "a resync reads, and writes nothing")
}

func TestOCMDeliverChangedPatches(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t)
	e.srv.ResetCalls()
	e.reg.Labels = map[string]string{"env": "staging"}
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{e.get(200), e.patch(200)}))
	got, _ := e.srv.SyncSet(ocmClusterID, e.id())
	g.Expect(got).To(gomega.Equal(e.wantResources(t)))
}

func TestOCMDeliverCreatedConcurrently(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		current bool // the concurrent creator wrote the current objects
		want    func(e *ocmEnv) []ocmtest.Call
	}{
		{"same objects", true, func(e *ocmEnv) []ocmtest.Call {
			return []ocmtest.Call{ocmToken("client_credentials", 200), e.get(404), e.post(409), e.get(200)}
		}},
		{"older objects", false, func(e *ocmEnv) []ocmtest.Call {
			return []ocmtest.Call{ocmToken("client_credentials", 200), e.get(404), e.post(409), e.get(200), e.patch(200)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			existing := e.wantResources(t)
			if !tc.current {
				existing = existing[:1]
			}
			// Another pass created the SyncSet between this pass's GET and POST.
			e.srv.PutSyncSet(ocmClusterID, e.id(), existing)
			e.srv.Fail("GET", 404, "Syncset not found")
			e.deliver(t)
			g.Expect(e.srv.Calls()).To(gomega.Equal(tc.want(e)))
			got, _ := e.srv.SyncSet(ocmClusterID, e.id())
			g.Expect(got).To(gomega.Equal(e.wantResources(t)))
		})
	}
}

// TestOCMDeliverMovesALegacySyncSet delivers a registration an earlier
// release delivered under the legacy id: the SyncSet is created under the
// ext- id and the legacy one deleted, so the hub holds one copy.
func TestOCMDeliverMovesALegacySyncSet(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.srv.PutSyncSet(ocmClusterID, e.legacyID(), e.wantResources(t))
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{
		ocmToken("client_credentials", 200), e.get(404), e.post(201), e.delLegacy(204),
	}))
	g.Expect(e.srv.SyncSetIDs(ocmClusterID)).To(gomega.Equal([]string{e.id()}))
	// Withdrawing a registration still under the legacy id removes it too.
	e.srv.PutSyncSet(ocmClusterID, e.legacyID(), e.wantResources(t))
	_, err := e.d.Withdraw(context.Background(), e.hub, e.reg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(e.srv.SyncSetIDs(ocmClusterID)).To(gomega.BeEmpty())
}

func TestOCMWithdraw(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		deliver bool
		status  int
	}{
		{"deletes the SyncSet", true, 204},
		{"SyncSet already gone", false, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			if tc.deliver {
				e.deliver(t)
			}
			e.srv.ResetCalls()
			report, err := e.d.Withdraw(context.Background(), e.hub, e.reg)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(report.Done).To(gomega.BeTrue())
			g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonSyncSetDeleted))
			g.Expect(report.NoAgent).To(gomega.BeTrue())
			calls := e.srv.Calls()
			g.Expect(calls[len(calls)-1]).To(gomega.Equal(e.del(tc.status)))
			g.Expect(e.srv.SyncSetIDs(ocmClusterID)).To(gomega.BeEmpty())
		})
	}
}

func TestOCMServerErrorIsRetried(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.srv.Fail("GET", 503, "Service temporarily unavailable")
	report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
	g.Expect(err).To(gomega.HaveOccurred(), "a 5xx is returned, so the queue backs off")
	g.Expect(report.Done).To(gomega.BeFalse())
	g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonSyncSetAPIError))
	var api *syncset.APIError
	g.Expect(errors.As(err, &api)).To(gomega.BeTrue())
	g.Expect(api.Mode).To(gomega.Equal(fleet.DeliverySyncSetOCM))
	g.Expect(api.Op).To(gomega.Equal(syncset.OpGet))
	g.Expect(api.Status).To(gomega.Equal(503))
	g.Expect(api.Reason).To(gomega.Equal("Service temporarily unavailable"), "the reason of OCM's error body")
	g.Expect(api.Retryable()).To(gomega.BeTrue())
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken("client_credentials", 200), e.get(503)}),
		"the SDK does not retry by default")

	e.srv.ResetCalls()
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{e.get(404), e.post(201), e.delLegacy(404)}))
}

func TestOCMSDKRetriesWhenConfigured(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, func(c *syncset.OCMConfig) { c.RetryLimit, c.RetryInterval = 1, time.Millisecond })
	e.srv.Fail("GET", 503, "Service temporarily unavailable")
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{
		ocmToken("client_credentials", 200), e.get(503), e.get(404), e.post(201), e.delLegacy(404),
	}))
}

func TestOCMClientErrorFailsDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, reason string
		status         int
	}{
		{"POST", "resources[0] is not a valid object", 400},
		{"GET", "Account is not authorized to view this cluster", 403},
		{"PATCH", "Cluster is in a state that forbids changes", 422},
	} {
		t.Run(tc.method+" "+tc.reason, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			if tc.method == "PATCH" {
				e.deliver(t)
				e.reg.Labels = map[string]string{"env": "staging"}
			}
			e.srv.ResetCalls()
			e.srv.Fail(tc.method, tc.status, tc.reason)
			report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "a 4xx is not retried before the resync")
			g.Expect(report.Done).To(gomega.BeFalse())
			g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonDeliveryFailed))
			g.Expect(report.NoAgent).To(gomega.BeTrue())
			g.Expect(report.Message).To(gomega.ContainSubstring(tc.reason))
			calls := e.srv.Calls()
			g.Expect(calls[len(calls)-1]).To(gomega.HaveField("Status", tc.status))
			path := e.path()
			if tc.method == "POST" {
				path = ocmtest.SyncSetsPath(ocmClusterID)
			}
			g.Expect(ocmCount(calls, tc.method+" "+path)).To(gomega.Equal(1), "the failed call is made once")
		})
	}
}

func TestOCMUnreachableIsRetried(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, func(c *syncset.OCMConfig) { c.Timeout = time.Second })
	e.hub.OCM.APIURL = "http://127.0.0.1:1"
	report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonSyncSetAPIError))
	var api *syncset.APIError
	g.Expect(errors.As(err, &api)).To(gomega.BeTrue())
	g.Expect(api.Status).To(gomega.BeZero())
	g.Expect(api.Retryable()).To(gomega.BeTrue())
}

func TestOCMMetrics(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t) // token, GET 404, POST 201, DELETE of the legacy id 404
	e.deliver(t) // GET 200
	e.srv.Fail("GET", 500, "boom")
	_, err := e.d.Deliver(context.Background(), e.hub, e.reg) // GET 500
	g.Expect(err).To(gomega.HaveOccurred())
	e.srv.RevokeAccessTokens()
	e.reg.Labels = map[string]string{"env": "staging"}
	e.deliver(t)                                              // GET 401, token, GET 200, PATCH 200
	_, err = e.d.Withdraw(context.Background(), e.hub, e.reg) // DELETE of the legacy id 404, DELETE 204
	g.Expect(err).NotTo(gomega.HaveOccurred())

	want := `
# HELP fleet_manager_syncset_api_calls_total SyncSet API calls, by delivery mode, operation and outcome.
# TYPE fleet_manager_syncset_api_calls_total counter
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="create",outcome="success"} 1
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="delete",outcome="not_found"} 2
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="delete",outcome="success"} 1
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="get",outcome="client_error"} 1
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="get",outcome="not_found"} 1
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="get",outcome="server_error"} 1
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="get",outcome="success"} 2
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="token",outcome="success"} 2
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="update",outcome="success"} 1
`
	g.Expect(testutil.GatherAndCompare(e.metrics, strings.NewReader(want), "fleet_manager_syncset_api_calls_total")).To(gomega.Succeed())
	g.Expect(ocmApplies(g, e.metrics)).To(gomega.Equal(map[string]uint64{"success": 3, "error": 1}), "one observation per Deliver")
}
