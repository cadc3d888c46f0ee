// Package hydratest runs a real OIDC issuer for tests: Ory Hydra with an
// in-memory store on loopback ports, issuing RS256 JWT access tokens. It
// starts once per test binary, on the first Start, and all tests of the
// package share it (t.Parallel is fine; give clients distinct ids). Main
// stops it when the tests are done:
//
//	func TestMain(m *testing.M) { hydratest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		issuer := hydratest.Start(t)
//		issuer.CreateClient(t, "agent", "secret", "fleet-manager", "fleet:read")
//		token := issuer.Token(t, "agent", "secret", "fleet-manager")
//		...
//	}
//
// The binary is $HYDRA_BIN (default hydra/hydra in the cache folder,
// $FLEET_MANAGER_CACHE or ~/.cache/fleet-manager), which
// scripts/hydra/build-hydra.sh builds.
package hydratest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// BinEnv names the environment variable that holds the hydra binary's path.
const BinEnv = "HYDRA_BIN"

const buildScript = "scripts/hydra/build-hydra.sh"

// startAttempts bounds the retries when another process takes a port
// between freePorts and the bind.
const startAttempts = 3

// Hydra is a running Hydra shared by the tests of a package.
type Hydra struct {
	proc      *childproc.Process
	dir       string
	public    string // http://127.0.0.1:<port>, no trailing slash
	admin     string
	discovery discovery
	http      *http.Client
	startup   time.Duration

	mu     sync.Mutex
	scopes map[string][]string // client id -> scopes, for Token
}

// discovery is the part of /.well-known/openid-configuration the tests use.
type discovery struct {
	Issuer        string `json:"issuer"`
	JWKSURI       string `json:"jwks_uri"`
	TokenEndpoint string `json:"token_endpoint"`
}

// shared holds the one Hydra of the test binary.
var shared childproc.Shared[Hydra]

// Start returns the Hydra of this test binary, starting it on the first
// call. It fails the test when Hydra cannot start, for instance when the
// binary is missing; it never skips.
func Start(t testing.TB) *Hydra {
	t.Helper()
	return shared.Get(t, "hydratest.Start", start, func(h *Hydra) {
		t.Logf("hydratest: hydra with issuer %s started in %s", h.Issuer(), h.startup.Round(time.Millisecond))
	})
}

// Main runs the tests and then stops Hydra, if it was started; call it from
// TestMain. A package that needs more than one such helper calls m.Run
// itself and then Stop.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the Hydra of this test binary and removes its folder. Tests
// that call Start afterwards fail.
func Stop() {
	shared.Stop(func(h *Hydra) {
		h.proc.Stop(10 * time.Second)
		_ = os.RemoveAll(h.dir)
	})
}

// start runs hydra serve all on two free loopback ports and waits until
// both answer and discovery is served.
func start() (_ *Hydra, err error) {
	began := time.Now()
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hydratest-")
	if err != nil {
		return nil, fmt.Errorf("hydratest: %w", err)
	}
	h := &Hydra{dir: dir, http: &http.Client{Timeout: 60 * time.Second}, scopes: map[string][]string{}}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if _, err := childproc.StartOnFreePorts(startAttempts, 5*time.Second, func() (*childproc.Process, error) {
		err := h.run(bin)
		return h.proc, err
	}); err != nil {
		return nil, fmt.Errorf("hydratest: %w", err)
	}
	if err := h.getJSON(h.public+"/.well-known/openid-configuration", &h.discovery); err != nil {
		h.proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("hydratest: discovery: %w", err)
	}
	// Hydra makes its RSA signing keys on first use, which takes seconds:
	// have it make them now, so the start time holds it and tests do not.
	var jwks struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := h.getJSON(h.discovery.JWKSURI, &jwks); err != nil || len(jwks.Keys) == 0 {
		h.proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("hydratest: JWKS %s: %d keys, error %v", h.discovery.JWKSURI, len(jwks.Keys), err)
	}
	h.startup = time.Since(began)
	return h, nil
}

// run starts one hydra process and waits for it to be ready.
func (h *Hydra) run(bin string) error {
	ports, err := childproc.FreePorts(2)
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	h.public = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	h.admin = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + h.dir,
		"DSN=memory",
		"SERVE_PUBLIC_HOST=127.0.0.1",
		"SERVE_PUBLIC_PORT=" + strconv.Itoa(ports[0]),
		"SERVE_ADMIN_HOST=127.0.0.1",
		"SERVE_ADMIN_PORT=" + strconv.Itoa(ports[1]),
		"URLS_SELF_ISSUER=" + h.public + "/",
		"STRATEGIES_ACCESS_TOKEN=jwt",
		"SECRETS_SYSTEM=" + hex.EncodeToString(secret),
		"SQA_OPT_OUT=true",
	}
	h.proc, err = childproc.Start(childproc.Options{Name: "hydra", Dir: h.dir, Env: env, LogPath: filepath.Join(h.dir, "hydra.log")}, bin, "serve", "all", "--dev")
	if err != nil {
		return err
	}
	return h.proc.WaitReady(30*time.Second, func() error {
		if err := h.probe(h.admin + "/health/ready"); err != nil {
			return err
		}
		return h.probe(h.public + "/health/alive")
	})
}

// findBinary returns $HYDRA_BIN or the cache folder's hydra/hydra.
func findBinary() (string, error) {
	bin := os.Getenv(BinEnv)
	if bin == "" {
		var err error
		if bin, err = childproc.CachePath("hydra", "hydra"); err != nil {
			return "", fmt.Errorf("hydratest: %w, or %s", err, BinEnv)
		}
	}
	if info, err := os.Stat(bin); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("hydratest: no executable %s: run %s (it builds Ory Hydra there; %s chooses the path)", bin, buildScript, BinEnv)
	}
	return bin, nil
}

// Issuer returns the issuer URL as discovery and the tokens' iss state it.
func (h *Hydra) Issuer() string { return h.discovery.Issuer }

// JWKSURL returns the URL of the public signing keys.
func (h *Hydra) JWKSURL() string { return h.discovery.JWKSURI }

// TokenURL returns the OAuth2 token endpoint.
func (h *Hydra) TokenURL() string { return h.discovery.TokenEndpoint }

// AdminURL returns the base URL of Hydra's admin API, without trailing slash.
func (h *Hydra) AdminURL() string { return h.admin }

// StartupTime returns how long Hydra took to start and become ready.
func (h *Hydra) StartupTime() time.Duration { return h.startup }

// probe returns nil when GET url answers 200.
func (h *Hydra) probe(url string) error {
	resp, err := h.http.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// getJSON decodes the 200 answer of GET url into v.
func (h *Hydra) getJSON(url string, v any) error {
	resp, err := h.http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
