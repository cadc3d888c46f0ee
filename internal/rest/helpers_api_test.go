package rest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/rest/apitest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/internal/stack"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// waitFor bounds every Eventually of the end-to-end tests; the reconcilers
// are woken by notifications, so a pass takes milliseconds, not seconds.
const waitFor = 10 * time.Second

// stackEnv is the whole service on one database: the API server of apiEnv,
// validating clients of the admin and private specifications, and what the
// reconcilers need to run against the same database.
type stackEnv struct {
	*apiEnv
	admin    *admin.ClientWithResponses
	agent    *private.ClientWithResponses
	dbCfg    postgres.Config
	keyring  *secrets.Keyring
	storeCfg postgres.StoreConfig
}

// newStackEnv mirrors newAPIEnv, keeping the database configuration so that
// reconcilers can open their own pool on the same database.
func newStackEnv(t testing.TB, f flavour) *stackEnv {
	t.Helper()
	return newStackEnvWith(t, f, testStoreConfig())
}

// testStoreConfig is the default store configuration with the tests' largest
// page, 50, so that paging is exercised with few rows.
func testStoreConfig() postgres.StoreConfig {
	cfg := postgres.DefaultStoreConfig()
	cfg.MaxPageSize = 50
	return cfg
}

// newStackEnvWith is newStackEnv with the store configured by storeCfg.
func newStackEnvWith(t testing.TB, f flavour, storeCfg postgres.StoreConfig) *stackEnv {
	t.Helper()
	key, err := auth.EnsureDevKey(t.TempDir())
	if err != nil {
		t.Fatalf("EnsureDevKey(): %v", err)
	}
	jwks := serveJWKS(t, key.JWKSPath)
	f.auth.JWKSURL = jwks.URL + "/jwks.json"
	f.auth.Issuers = []string{testIssuer}
	f.auth.Audience = testAudience
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	verifier, err := auth.NewVerifier(context.Background(), f.auth, logger, jwks.Client())
	if err != nil {
		t.Fatalf("NewVerifier(): %v", err)
	}
	t.Cleanup(verifier.Close)
	reg := prometheus.NewRegistry()
	db, dbCfg := pgtest.NewMigratedDatabase(t)
	keyring := newTestKeyring(t)
	f.http.OrgRoles = f.authz.OrgRoles
	if err := f.authz.Validate(); err != nil {
		t.Fatalf("authz.Config.Validate(): %v", err)
	}
	cfg := stack.DefaultConfig()
	cfg.DB, cfg.Store, cfg.HTTP, cfg.Authz = dbCfg, storeCfg, f.http, f.authz
	cfg.Reconcile.Enabled = false
	svc := startStack(t, cfg, stack.Parts{DB: db, Keyring: keyring, Authenticator: verifier, Logger: logger, Registerer: reg})
	store, srv := svc.Store, svc.API
	handler, err := srv.Handler()
	if err != nil {
		t.Fatalf("Handler(): %v", err)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	base := ts.URL + f.http.BasePath
	e := &stackEnv{
		apiEnv: &apiEnv{flavour: f, key: key, base: base, server: ts, registry: reg, logs: logs, store: store, api: srv},
		dbCfg:  dbCfg, keyring: keyring, storeCfg: storeCfg,
	}
	if e.client, err = public.NewClientWithResponses(base,
		public.WithHTTPClient(apitest.ValidatingClient(t, openapi.Specs, openapi.Public, base))); err != nil {
		t.Fatalf("public.NewClientWithResponses(): %v", err)
	}
	if e.admin, err = admin.NewClientWithResponses(base,
		admin.WithHTTPClient(apitest.ValidatingClient(t, openapi.Specs, openapi.Admin, base))); err != nil {
		t.Fatalf("admin.NewClientWithResponses(): %v", err)
	}
	if e.agent, err = private.NewClientWithResponses(base,
		private.WithHTTPClient(apitest.ValidatingClient(t, openapi.Specs, openapi.Private, base))); err != nil {
		t.Fatalf("private.NewClientWithResponses(): %v", err)
	}
	return e
}

// startStack builds the stack serve builds and runs it until t ends.
func startStack(t testing.TB, cfg stack.Config, parts stack.Parts) *stack.Stack {
	t.Helper()
	svc, err := stack.New(context.Background(), cfg, parts)
	if err != nil {
		t.Fatalf("stack.New(): %v", err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatalf("Start(): %v", err)
	}
	t.Cleanup(svc.Stop)
	return svc
}

func newTestKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	k, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatalf("NewKeyring(): %v", err)
	}
	return k
}

// startReconcilers runs the reconcilers serve runs against the env's
// database, on their own pool and listener as another replica would, until t
// ends. Their log is shown when t fails.
func (e *stackEnv) startReconcilers(t *testing.T) {
	t.Helper()
	cfg := stack.DefaultConfig()
	cfg.DB, cfg.Store, cfg.HeartbeatCheck = e.dbCfg, e.storeCfg, time.Second
	cfg.Queue = postgres.QueueConfig{BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second}
	cfg.Reconcile.Lease, cfg.Reconcile.RemovalTimeout, cfg.Reconcile.StatsInterval, cfg.Reconcile.PoolResync = 10*time.Second, time.Hour, time.Second, 200*time.Millisecond
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reconciler log:\n%s", logs.String())
		}
	})
	startStack(t, cfg, stack.Parts{DB: pgtest.Open(t, e.dbCfg), Keyring: e.keyring, Logger: logger})
}

// userToken mints a token of user in org, with no role.
func (e *apiEnv) userToken(t testing.TB, org, user string) string {
	t.Helper()
	return e.token(t, auth.TokenRequest{OrgID: org, Username: user})
}

// adminToken mints a token with every role of --admin-roles.
func (e *apiEnv) adminToken(t testing.TB) string {
	t.Helper()
	return e.token(t, auth.TokenRequest{OrgID: "sre", Username: "sre-admin", Roles: e.http.AdminRoles})
}

// viewerToken mints a token with the read-only admin roles: those of
// --admin-read-roles that are not also in --admin-roles.
func (e *apiEnv) viewerToken(t *testing.T) string {
	t.Helper()
	var roles []string
	for _, r := range e.http.AdminReadRoles {
		if !slices.Contains(e.http.AdminRoles, r) {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		t.Fatalf("viewerToken(): --admin-read-roles %v has no role outside --admin-roles %v", e.http.AdminReadRoles, e.http.AdminRoles)
	}
	return e.token(t, auth.TokenRequest{OrgID: "sre", Username: "sre-viewer", Roles: roles})
}

// agentToken mints the token a hub's fleetshard-sync carries.
func (e *apiEnv) agentToken(t testing.TB, agentID string) string {
	t.Helper()
	return e.token(t, auth.TokenRequest{AgentID: agentID})
}

// adminAuth is bearer for the admin client.
func adminAuth(token string) admin.RequestEditorFn { return admin.RequestEditorFn(bearer(token)) }

// agentAuth is bearer for the private client.
func agentAuth(token string) private.RequestEditorFn { return private.RequestEditorFn(bearer(token)) }

// fromAdmin and fromPrivate turn the other specs' error bodies into the public
// one, so that wantError checks them all.
func fromAdmin(e *admin.Error) *public.Error {
	if e == nil {
		return nil
	}
	return &public.Error{Kind: public.ErrorKind(e.Kind), Id: e.Id, Href: e.Href, Code: e.Code, Reason: e.Reason, OperationId: e.OperationId}
}

func fromPrivate(e *private.Error) *public.Error {
	if e == nil {
		return nil
	}
	return &public.Error{Kind: public.ErrorKind(e.Kind), Id: e.Id, Href: e.Href, Code: e.Code, Reason: e.Reason, OperationId: e.OperationId}
}

// createCluster registers a cluster and fails t unless it is accepted.
func (e *apiEnv) createCluster(t testing.TB, token string, body public.ClusterCreate) public.Cluster {
	t.Helper()
	resp, err := e.client.CreateClusterWithResponse(context.Background(), nil, body, bearer(token))
	if err != nil || resp.JSON202 == nil {
		t.Fatalf("CreateCluster(%s) = %s; want 202", body.Name, outcome(resp, err))
	}
	return *resp.JSON202
}

// createAgentHub registers a hub delivered by an agent whose identity is
// name + "-agent", and fails t unless it is created.
func (e *stackEnv) createAgentHub(t testing.TB, name, zone string, capacity int) admin.Hub {
	t.Helper()
	resp, err := e.admin.CreateHubWithResponse(context.Background(), admin.HubCreate{
		Name: name, Zone: zone, Region: zone + "-1", DeliveryMode: admin.Agent, Capacity: capacity,
		AgentIdentity: ptr(name + "-agent"),
	}, adminAuth(e.adminToken(t)))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateHub(%s) = %s; want 201", name, outcome(resp, err))
	}
	return *resp.JSON201
}

// heartbeat plays hub's agent: it reports, acknowledging applied.
func (e *stackEnv) heartbeat(t *testing.T, hub admin.Hub, applied int64) private.HubStatusAck {
	t.Helper()
	resp, err := e.agent.PutHubStatusWithResponse(context.Background(), hub.Id,
		private.HubStatusReport{AgentVersion: "test", AgentStartGeneration: 1, AppliedRevision: applied},
		agentAuth(e.agentToken(t, deref(hub.AgentIdentity))))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("PutHubStatus(%s, %d) = %s; want 200", hub.Name, applied, outcome(resp, err))
	}
	return *resp.JSON200
}

// getHub reads a hub through the admin API.
func (e *stackEnv) getHub(t *testing.T, id string) admin.Hub {
	t.Helper()
	resp, err := e.admin.GetHubWithResponse(context.Background(), id, adminAuth(e.adminToken(t)))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("GetHub(%s) = %s; want 200", id, outcome(resp, err))
	}
	return *resp.JSON200
}

// ackAll plays hub's agent: it acknowledges the hub's current revision, read
// through the admin API.
func (e *stackEnv) ackAll(t *testing.T, hub admin.Hub) private.HubStatusAck {
	t.Helper()
	return e.heartbeat(t, hub, e.getHub(t, hub.Id).Revision)
}

// eventuallyCluster polls a cluster through the public API until match holds,
// and returns the cluster that matched.
func (e *apiEnv) eventuallyCluster(t *testing.T, token, id, what string, match func(public.Cluster) bool) public.Cluster {
	t.Helper()
	var last public.Cluster
	gomega.NewWithT(t).Eventually(func() bool {
		resp, err := e.client.GetClusterWithResponse(context.Background(), id, bearer(token))
		if err != nil || resp.JSON200 == nil {
			return false
		}
		last = *resp.JSON200
		return match(last)
	}).WithTimeout(waitFor).WithPolling(25*time.Millisecond).Should(gomega.BeTrue(),
		"cluster %s never %s; last: %s", id, what, describeCluster(last))
	return last
}

// eventuallyGone polls a cluster until the public API answers 404.
func (e *apiEnv) eventuallyGone(t *testing.T, token, id string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() int {
		resp, err := e.client.GetClusterWithResponse(context.Background(), id, bearer(token))
		if err != nil {
			return 0
		}
		return resp.StatusCode()
	}).WithTimeout(waitFor).WithPolling(25*time.Millisecond).Should(gomega.Equal(http.StatusNotFound),
		"GetCluster(%s) after deregistration", id)
}

// clusterCondition returns the condition of type typ, if c has one.
func clusterCondition(c public.Cluster, typ string) (public.Condition, bool) {
	for _, cond := range c.Conditions {
		if cond.Type == typ {
			return cond, true
		}
	}
	return public.Condition{}, false
}

// hasCondition reports whether c's condition typ has status and reason.
func hasCondition(c public.Cluster, typ string, status public.ConditionStatus, reason string) bool {
	cond, ok := clusterCondition(c, typ)
	return ok && cond.Status == status && cond.Reason == reason
}

// describeCluster renders the phase, hub and conditions of c for messages.
func describeCluster(c public.Cluster) string {
	s := "phase " + string(c.Phase)
	if c.Hub != nil {
		s += " on hub " + c.Hub.Name + " (zone " + c.Hub.Zone + ")"
	}
	for _, cond := range c.Conditions {
		s += "; " + cond.Type + "=" + string(cond.Status) + " (" + cond.Reason + ")"
	}
	return s
}

// response is what every generated response has.
type response interface{ StatusCode() int }

// outcome renders a generated response for messages: its status and body,
// or the transport error.
func outcome(resp any, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	v := reflect.ValueOf(resp)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "no response"
		}
		v = v.Elem()
	}
	status := 0
	if hr, ok := v.FieldByName("HTTPResponse").Interface().(*http.Response); ok && hr != nil {
		status = hr.StatusCode
	}
	return fmt.Sprintf("%d %s", status, bytes.TrimSpace(v.FieldByName("Body").Bytes()))
}

// clusterTotal lists the caller's clusters matching search and returns the total.
func clusterTotal(t *testing.T, e *stackEnv, tok, search string) int {
	t.Helper()
	params := &public.ListClustersParams{Size: ptr(50)}
	if search != "" {
		params.Search = ptr(search)
	}
	resp, err := e.client.ListClustersWithResponse(context.Background(), params, bearer(tok))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("ListClusters(search %q) = %s; want 200", search, outcome(resp, err))
	}
	return resp.JSON200.Total
}
