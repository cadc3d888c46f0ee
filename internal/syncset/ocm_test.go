package syncset_test

// The syncset-ocm tests run ocm-sdk-go's real client against ocmtest.Server,
// a stand-in for OCM implementing the documented contract of its
// clusters_mgmt external-configuration SyncSet endpoints and of Red Hat SSO's
// token endpoint (there is no public OCM to test against). The Source, our own
// interface, is an in-memory fake. No test here starts a hub.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/ocmtest"
)

const (
	ocmClusterID = "2h9luc0gq0ndb59258q77lr1pmon1j4j"
	ocmClient    = "fleet-manager-sa"
	ocmSecret    = "s3cret"
)

// ocmSource is an in-memory syncset.Source: a hub's credentials and the
// objects fleet.DesiredObjects renders for a registration.
type ocmSource struct {
	mu    sync.Mutex
	creds map[string]string
}

func (s *ocmSource) setCredentials(creds map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creds = maps.Clone(creds)
}

func (s *ocmSource) HubCredentials(_ context.Context, _ string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.creds), nil
}

func (s *ocmSource) RegistrationObjects(_ context.Context, hubID string, reg fleet.Registration) ([]map[string]any, error) {
	return fleet.DesiredObjects(reg, hubID, &fleet.ImportCredentials{APIURL: "https://api.spoke.example.com:6443", Token: "import-token"}), nil
}

// ocmEnv is a fake OCM, a delivery talking to it and a registration to
// deliver to a syncset-ocm hub.
type ocmEnv struct {
	srv     *ocmtest.Server
	src     *ocmSource
	metrics *prometheus.Registry
	d       *syncset.OCMDelivery
	hub     fleet.Hub
	reg     fleet.Registration
}

// newOCMEnv starts a fake OCM knowing one cluster and one OAuth client, and a
// delivery using that client; cfg adjusts the delivery's configuration.
func newOCMEnv(t *testing.T, cfg func(*syncset.OCMConfig)) *ocmEnv {
	t.Helper()
	e := &ocmEnv{srv: ocmtest.New(t), src: &ocmSource{}, metrics: prometheus.NewRegistry()}
	e.srv.AddCluster(ocmClusterID)
	e.srv.AddClient(ocmClient, ocmSecret)
	e.src.setCredentials(map[string]string{fleet.CredentialOCMClientID: ocmClient, fleet.CredentialOCMClientSecret: ocmSecret})
	m, err := syncset.NewMetrics("fleet_manager", e.metrics)
	if err != nil {
		t.Fatalf("NewMetrics() = %v", err)
	}
	c := syncset.DefaultOCMConfig()
	c.TokenURL = e.srv.TokenURL()
	if cfg != nil {
		cfg(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("OCMConfig.Validate() = %v", err)
	}
	e.d = syncset.NewOCMDelivery(c, e.src, m, nil)
	t.Cleanup(func() {
		if err := e.d.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	e.hub = fleet.Hub{ID: "hub-ocm-1", Name: "hub-ocm-1", DeliveryMode: fleet.DeliverySyncSetOCM,
		OCM: &fleet.OCMTarget{ClusterID: ocmClusterID, APIURL: e.srv.URL()}}
	e.reg = fleet.Registration{ID: "0b9c2f5e-8a51-4c3e-9d55-2f1e7d4b6a10", OrgID: "org-1", Name: "prod-eu-1",
		Labels: map[string]string{"env": "prod"}}
	return e
}

func (e *ocmEnv) id() string   { return fleet.SyncSetName(e.reg) }
func (e *ocmEnv) path() string { return ocmtest.SyncSetPath(ocmClusterID, e.id()) }

// Calls the fake OCM answers, as tests expect them.
func (e *ocmEnv) get(status int) ocmtest.Call {
	return ocmtest.Call{Method: "GET", Path: e.path(), Status: status}
}
func (e *ocmEnv) patch(status int) ocmtest.Call {
	return ocmtest.Call{Method: "PATCH", Path: e.path(), Status: status}
}
func (e *ocmEnv) del(status int) ocmtest.Call {
	return ocmtest.Call{Method: "DELETE", Path: e.path(), Status: status}
}
func (e *ocmEnv) post(status int) ocmtest.Call {
	return ocmtest.Call{Method: "POST", Path: ocmtest.SyncSetsPath(ocmClusterID), Status: status}
}
func ocmToken(grant string, status int) ocmtest.Call {
	return ocmtest.Call{Method: "POST", Path: ocmtest.TokenPath, Status: status, Grant: grant}
}

// deliver runs Deliver and expects it done.
func (e *ocmEnv) deliver(t *testing.T) fleet.DeliveryReport {
	t.Helper()
	report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
	if err != nil || !report.Done {
		t.Fatalf("Deliver(%s) = %+v, %v; want done", e.reg.ID, report, err)
	}
	return report
}

// wantResources is what the SyncSet should hold: the rendered objects as JSON.
func (e *ocmEnv) wantResources(t *testing.T) []any {
	t.Helper()
	objects, _ := e.src.RegistrationObjects(context.Background(), e.hub.ID, e.reg)
	g := gomega.NewWithT(t)
	var want []any
	for _, o := range objects {
		want = append(want, ocmJSON(g, o))
	}
	return want
}

func TestOCMSyncSetIDFitsOCM(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	g.Expect(e.id()).To(gomega.HaveLen(38))
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
		ocmToken("client_credentials", 200), e.get(404), e.post(201),
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
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{e.get(404), e.post(201)}))
}

func TestOCMSDKRetriesWhenConfigured(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, func(c *syncset.OCMConfig) { c.RetryLimit, c.RetryInterval = 1, time.Millisecond })
	e.srv.Fail("GET", 503, "Service temporarily unavailable")
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{
		ocmToken("client_credentials", 200), e.get(503), e.get(404), e.post(201),
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

func TestOCMCredentialKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		grant string
		creds func(srv *ocmtest.Server) map[string]string
	}{
		{"client credentials", "client_credentials", func(*ocmtest.Server) map[string]string {
			return map[string]string{fleet.CredentialOCMClientID: ocmClient, fleet.CredentialOCMClientSecret: ocmSecret}
		}},
		{"offline token", "refresh_token", func(srv *ocmtest.Server) map[string]string {
			return map[string]string{fleet.CredentialOCMOfflineToken: srv.IssueOfflineToken()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			e.src.setCredentials(tc.creds(e.srv))
			e.deliver(t)
			g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken(tc.grant, 200), e.get(404), e.post(201)}))

			// The fake revokes the access token: the same Deliver gets a new one.
			e.srv.RevokeAccessTokens()
			e.srv.ResetCalls()
			e.reg.Labels = map[string]string{"env": "staging"}
			e.deliver(t)
			g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{
				e.get(401), ocmToken(tc.grant, 200), e.get(200), e.patch(200),
			}))
		})
	}
}

func TestOCMBadCredentialsFailDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		creds  map[string]string
		grant  string
		status int
		reason string
	}{
		{"wrong client secret", map[string]string{fleet.CredentialOCMClientID: ocmClient, fleet.CredentialOCMClientSecret: "wrong"},
			"client_credentials", 401, "invalid_client"},
		{"unknown offline token", map[string]string{fleet.CredentialOCMOfflineToken: "opaque-unknown-token"},
			"refresh_token", 400, "invalid_grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			e.src.setCredentials(tc.creds)
			report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "credentials SSO refuses need fixing, not retrying")
			g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonDeliveryFailed))
			g.Expect(report.Message).To(gomega.And(gomega.ContainSubstring(tc.reason), gomega.ContainSubstring("token")))
			g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken(tc.grant, tc.status)}), "no API call without a token")
		})
	}
}

func TestOCMCredentialsChangeBuildsNewConnection(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t)
	e.deliver(t)
	g.Expect(ocmCount(e.srv.Calls(), "POST "+ocmtest.TokenPath)).To(gomega.Equal(1), "the connection and its token are reused")

	e.src.setCredentials(map[string]string{fleet.CredentialOCMOfflineToken: e.srv.IssueOfflineToken()})
	e.srv.ResetCalls()
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken("refresh_token", 200), e.get(200)}))

	e.srv.AddClient("rotated-client", "rotated-secret")
	e.src.setCredentials(map[string]string{fleet.CredentialOCMClientID: "rotated-client", fleet.CredentialOCMClientSecret: "rotated-secret"})
	e.srv.ResetCalls()
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken("client_credentials", 200), e.get(200)}))
}

func TestOCMHubTokenURLOverridesDefault(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, func(c *syncset.OCMConfig) { c.TokenURL = "http://127.0.0.1:1/token" })
	e.hub.OCM.TokenURL = e.srv.TokenURL()
	e.deliver(t)
	g.Expect(e.srv.Calls()[0]).To(gomega.Equal(ocmToken("client_credentials", 200)))
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

func TestOCMHubWithoutTargetOrCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(e *ocmEnv)
		want  string
	}{
		{"no OCM target", func(e *ocmEnv) { e.hub.OCM = nil }, "no OCM target"},
		{"no credentials", func(e *ocmEnv) { e.src.setCredentials(nil) }, fleet.CredentialOCMOfflineToken},
		{"client id without secret", func(e *ocmEnv) {
			e.src.setCredentials(map[string]string{fleet.CredentialOCMClientID: ocmClient})
		}, fleet.CredentialOCMClientSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			tc.setup(e)
			for _, step := range []func(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error){e.d.Deliver, e.d.Withdraw} {
				report, err := step(context.Background(), e.hub, e.reg)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonDeliveryFailed))
				g.Expect(report.Message).To(gomega.ContainSubstring(tc.want))
			}
			g.Expect(e.srv.Calls()).To(gomega.BeEmpty())
		})
	}
}

func TestOCMMetrics(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t) // token, GET 404, POST 201
	e.deliver(t) // GET 200
	e.srv.Fail("GET", 500, "boom")
	_, err := e.d.Deliver(context.Background(), e.hub, e.reg) // GET 500
	g.Expect(err).To(gomega.HaveOccurred())
	e.srv.RevokeAccessTokens()
	e.reg.Labels = map[string]string{"env": "staging"}
	e.deliver(t)                                              // GET 401, token, GET 200, PATCH 200
	_, err = e.d.Withdraw(context.Background(), e.hub, e.reg) // DELETE 204
	g.Expect(err).NotTo(gomega.HaveOccurred())

	want := `
# HELP fleet_manager_syncset_api_calls_total SyncSet API calls, by delivery mode, operation and outcome.
# TYPE fleet_manager_syncset_api_calls_total counter
fleet_manager_syncset_api_calls_total{mode="syncset-ocm",operation="create",outcome="success"} 1
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

func TestOCMConfig(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	def := syncset.DefaultOCMConfig()
	g.Expect(def.TokenURL).To(gomega.Equal("https://sso.redhat.com/auth/realms/redhat-external/protocol/openid-connect/token"))
	g.Expect(def.Validate()).To(gomega.Succeed())

	c := syncset.DefaultOCMConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	g.Expect(fs.Parse([]string{"--ocm-token-url=http://sso.example.com/token", "--ocm-timeout=0s",
		"--ocm-retry-limit=9", "--ocm-retry-interval=0s"})).To(gomega.Succeed())
	err := c.Validate()
	g.Expect(err).To(gomega.HaveOccurred())
	for _, flag := range []string{"--ocm-token-url", "--ocm-timeout", "--ocm-retry-limit", "--ocm-retry-interval"} {
		g.Expect(err.Error()).To(gomega.ContainSubstring(flag))
	}

	g.Expect(fs.Parse([]string{"--ocm-token-url=http://127.0.0.1:8080/token", "--ocm-timeout=10s",
		"--ocm-retry-limit=2", "--ocm-retry-interval=500ms"})).To(gomega.Succeed())
	g.Expect(c).To(gomega.Equal(syncset.OCMConfig{TokenURL: "http://127.0.0.1:8080/token", Timeout: 10 * time.Second,
		RetryLimit: 2, RetryInterval: 500 * time.Millisecond}))
	g.Expect(c.Validate()).To(gomega.Succeed())
}

func TestOCMClosedDeliveryFails(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t)
	g.Expect(e.d.Close()).To(gomega.Succeed())
	_, err := e.d.Deliver(context.Background(), e.hub, e.reg)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("closed")))
}

// ocmJSON is v as JSON decodes it.
func ocmJSON(g *gomega.WithT, v any) any {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var out any
	g.Expect(json.Unmarshal(b, &out)).To(gomega.Succeed())
	return out
}

// ocmCount counts the calls whose "METHOD" or "METHOD PATH" is what.
func ocmCount(calls []ocmtest.Call, what string) int {
	n := 0
	for _, c := range calls {
		if c.Method == what || c.Method+" "+c.Path == what {
			n++
		}
	}
	return n
}

// ocmApplies reads the apply histogram's sample counts by outcome.
func ocmApplies(g *gomega.WithT, reg *prometheus.Registry) map[string]uint64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	counts := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "fleet_manager_syncset_apply_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					counts[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return counts
}
