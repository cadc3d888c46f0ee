package rest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/internal/rest/apitest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

const (
	testIssuer   = "https://issuer.test/realms/fleet"
	testAudience = "fleet-manager-test"
)

// syncBuffer is a log sink the servers' goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// flavour is one configuration the API tests run under: upstream's, and a
// fork's with other names, to prove a fork needs no code change.
type flavour struct {
	name string
	http rest.Config
	auth auth.Config
}

func flavours() []flavour {
	fork := rest.DefaultConfig()
	fork.ServiceName = "acme-fleet"
	fork.BasePath = "/api/acme_fleet/v2"
	fork.ErrorCodePrefix = "ACME-FLT"
	forkAuth := auth.DefaultConfig()
	forkAuth.OrgClaim = "tenant.org"
	forkAuth.UsernameClaims = []string{"user"}
	forkAuth.RolesClaim = "groups"
	forkAuth.AgentClaims = []string{"client_id"}
	return []flavour{
		{name: "upstream", http: rest.DefaultConfig(), auth: auth.DefaultConfig()},
		{name: "fork", http: fork, auth: forkAuth},
	}
}

// apiEnv is a running API server with a JWKS endpoint and a key to sign with.
type apiEnv struct {
	flavour
	key      *auth.DevKey
	base     string // server URL plus base path
	server   *httptest.Server
	client   *public.ClientWithResponses
	registry *prometheus.Registry
	logs     *syncBuffer
	store    *postgres.Store
	api      *rest.Server
}

func newAPIEnv(t *testing.T, f flavour) *apiEnv {
	t.Helper()
	key, err := auth.EnsureDevKey(t.TempDir())
	if err != nil {
		t.Fatalf("EnsureDevKey(): %v", err)
	}
	jwks := serveJWKS(t, key.JWKSPath)
	f.auth.JWKSURL = jwks.URL + "/jwks.json"
	f.auth.Issuers = []string{testIssuer}
	f.auth.Audience = testAudience
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	verifier, err := auth.NewVerifier(context.Background(), f.auth, logger, jwks.Client())
	if err != nil {
		t.Fatalf("NewVerifier(): %v", err)
	}
	t.Cleanup(verifier.Close)
	reg := prometheus.NewRegistry()
	metrics, err := rest.NewHTTPMetrics(f.http, reg)
	if err != nil {
		t.Fatalf("NewHTTPMetrics(): %v", err)
	}
	store, dbCfg := newStore(t)
	srv, err := rest.NewServer(context.Background(), f.http, logger, verifier, metrics,
		rest.Services{Registrations: store, Hubs: store, Agents: store, Inventory: store, Revisions: startRevisionWatch(t, dbCfg)})
	if err != nil {
		t.Fatalf("NewServer(): %v", err)
	}
	handler, err := srv.Handler()
	if err != nil {
		t.Fatalf("Handler(): %v", err)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	base := ts.URL + f.http.BasePath
	client, err := public.NewClientWithResponses(base,
		public.WithHTTPClient(apitest.ValidatingClient(t, openapi.Specs, openapi.Public, base)))
	if err != nil {
		t.Fatalf("NewClientWithResponses(): %v", err)
	}
	return &apiEnv{flavour: f, key: key, base: base, server: ts, client: client, registry: reg, logs: logs, store: store, api: srv}
}

// newStore returns a store on a fresh, migrated database.
func newStore(t *testing.T) (*postgres.Store, postgres.Config) {
	t.Helper()
	db, dbCfg := pgtest.NewMigratedDatabase(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyring, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := postgres.DefaultStoreConfig()
	cfg.MaxPageSize = 50
	return postgres.NewStore(db, keyring, fleet.SystemClock{}, cfg), dbCfg
}

// serveJWKS serves the JWKS file at /jwks.json, read at every request so a
// test may rotate keys.
func serveJWKS(t *testing.T, path string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// token mints a token for the environment's issuer and audience.
func (e *apiEnv) token(t *testing.T, req auth.TokenRequest) string {
	t.Helper()
	req.Issuer, req.Audience = testIssuer, testAudience
	if req.TTL == 0 {
		req.TTL = time.Hour
	}
	tok, err := e.key.Mint(e.auth, req, time.Now())
	if err != nil {
		t.Fatalf("Mint(): %v", err)
	}
	return tok
}

// bearer adds the token to a generated client's request.
func bearer(token string) public.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// header sets one request header.
func header(name, value string) public.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set(name, value)
		return nil
	}
}
