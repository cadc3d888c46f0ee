package rest_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/internal/stack"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// outageEnv is the API server on a database behind a proxy, which a test
// stops (an outage) or holds (a frozen server).
type outageEnv struct {
	proxy *pgtest.Proxy
	base  string
	token string
	logs  *logtest.Buffer
}

func newOutageEnv(t *testing.T, httpCfg rest.Config) *outageEnv {
	t.Helper()
	_, direct := pgtest.NewMigratedDatabase(t)
	proxy, cfg := pgtest.NewProxy(t, direct)
	cfg.ConnectTimeout = time.Second
	e := serveOutageEnv(t, httpCfg, pgtest.Open(t, cfg), direct)
	e.proxy = proxy
	return e
}

// serveOutageEnv is the API server with its store on db; its listener, which
// wakes the long polls, connects to watched.
func serveOutageEnv(t *testing.T, httpCfg rest.Config, db *postgres.DB, watched postgres.Config) *outageEnv {
	t.Helper()
	f := flavours()[0]
	f.http = httpCfg
	key, err := auth.EnsureDevKey(t.TempDir())
	if err != nil {
		t.Fatalf("EnsureDevKey(): %v", err)
	}
	jwks := serveJWKS(t, key.JWKSPath)
	f.auth.JWKSURL, f.auth.Issuers, f.auth.Audience = jwks.URL+"/jwks.json", []string{testIssuer}, testAudience
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	verifier, err := auth.NewVerifier(context.Background(), f.auth, logger, jwks.Client())
	if err != nil {
		t.Fatalf("NewVerifier(): %v", err)
	}
	t.Cleanup(verifier.Close)
	cfg := stack.DefaultConfig()
	cfg.DB, cfg.Store, cfg.HTTP = watched, testStoreConfig(), f.http
	cfg.Reconcile.Enabled = false
	srv := startStack(t, cfg, stack.Parts{DB: db, Keyring: newTestKeyring(t), Authenticator: verifier, Logger: logger}).API
	handler, err := srv.Handler()
	if err != nil {
		t.Fatalf("Handler(): %v", err)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	tok, err := key.Mint(f.auth, auth.TokenRequest{OrgID: "org-1", Username: "alice", Issuer: testIssuer, Audience: testAudience, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatalf("Mint(): %v", err)
	}
	return &outageEnv{base: ts.URL + f.http.BasePath, token: tok, logs: logs}
}

// outageAnswer is what a request answered, as a client sees it.
type outageAnswer struct {
	status     int
	retryAfter string
	body       public.Error
	elapsed    time.Duration
}

func (e *outageEnv) do(t *testing.T, method, path, body string) outageAnswer {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	a := outageAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), elapsed: time.Since(start)}
	_ = json.NewDecoder(resp.Body).Decode(&a.body)
	return a
}

// outageRequests are a write and reads of the public API.
var outageRequests = []struct{ method, path, body string }{
	{"POST", "/clusters", `{"name":"during-outage","zone":"eu","product":"OCP"}`},
	{"GET", "/clusters", ""},
	{"GET", "/managed_clusters", ""},
	{"GET", "/policies", ""},
	{"GET", "/dns_services", ""},
}

// TestDatabaseOutageAnswers503: with the database gone, creates and lists
// answer 503 Unavailable with Retry-After (not 500), and the log has the
// cause at warn level, never as an internal error.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t, rest.DefaultConfig())
	if a := e.do(t, "GET", "/clusters", ""); a.status != http.StatusOK {
		t.Fatalf("GET /clusters before the outage = %d %+v", a.status, a.body)
	}
	e.proxy.Stop()
	for _, r := range outageRequests {
		a := e.do(t, r.method, r.path, r.body)
		if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || a.body.Code != "FLEET-MGMT-10" {
			t.Errorf("%s %s during an outage = %d (Retry-After %q) %+v, want 503 FLEET-MGMT-10 with Retry-After",
				r.method, r.path, a.status, a.retryAfter, a.body)
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "request failed: unavailable") {
		t.Errorf("log of the outage:\n%s\nwant warnings with the cause, no error", logs)
	}
	e.proxy.Start()
	if a := e.do(t, "GET", "/clusters", ""); a.status != http.StatusOK {
		t.Errorf("GET /clusters after the outage = %d %+v, want 200", a.status, a.body)
	}
}

// TestHeldDatabaseAnswers503WithinTheDeadline: a database that accepts
// bytes and never answers holds a request no longer than
// --api-request-timeout, which then answers 503.
func TestHeldDatabaseAnswers503WithinTheDeadline(t *testing.T) {
	t.Parallel()
	cfg := rest.DefaultConfig()
	cfg.RequestTimeout = time.Second
	e := newOutageEnv(t, cfg)
	if a := e.do(t, "GET", "/clusters", ""); a.status != http.StatusOK {
		t.Fatalf("GET /clusters before the freeze = %d %+v", a.status, a.body)
	}
	e.proxy.Hold()
	for _, r := range outageRequests {
		a := e.do(t, r.method, r.path, r.body)
		if a.status != http.StatusServiceUnavailable || a.retryAfter == "" {
			t.Errorf("%s %s on a frozen database = %d (Retry-After %q) %+v, want 503 with Retry-After", r.method, r.path, a.status, a.retryAfter, a.body)
		}
		if a.elapsed > cfg.RequestTimeout+time.Second {
			t.Errorf("%s %s on a frozen database took %s, want it within the %s deadline", r.method, r.path, a.elapsed, cfg.RequestTimeout)
		}
	}
	e.proxy.Release()
}
