package rest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

const (
	testIssuer   = "https://issuer.test/realms/fleet"
	testAudience = "fleet-manager-test"
)

// flavour is one configuration the API tests run under: upstream's, and a
// fork's with other names, to prove a fork needs no code change.
type flavour struct {
	name  string
	http  rest.Config
	auth  auth.Config
	authz authz.Config
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
	forkAuthz := authz.DefaultConfig()
	forkAuthz.OrgRoles.OrgAdmin = []string{"acme:tenant-owner"}
	forkAuthz.OrgRoles.OrgMember = []string{"acme:tenant-engineer"}
	forkAuthz.OrgRoles.OrgViewer = []string{"acme:tenant-auditor"}
	return []flavour{
		{name: "upstream", http: rest.DefaultConfig(), auth: auth.DefaultConfig(), authz: authz.DefaultConfig()},
		{name: "fork", http: fork, auth: forkAuth, authz: forkAuthz},
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
	logs     *logtest.Buffer
	store    *postgres.Store
	api      *rest.Server
}

// newAPIEnv starts the API server of flavour f on a fresh database.
func newAPIEnv(t *testing.T, f flavour) *apiEnv {
	t.Helper()
	return newStackEnv(t, f).apiEnv
}

// serveJWKS serves the JWKS file at /jwks.json, read at every request so a
// test may rotate keys.
func serveJWKS(t testing.TB, path string) *httptest.Server {
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
func (e *apiEnv) token(t testing.TB, req auth.TokenRequest) string {
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
