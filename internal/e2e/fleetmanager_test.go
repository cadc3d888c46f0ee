package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/e2e/e2estack"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

const audience = e2estack.Audience

// fleetManager is the real fleet-manager binary serving one database, on
// ports that stay the same across restarts.
type fleetManager struct {
	t        testing.TB
	db       postgres.Config
	hydra    *hydratest.Hydra
	keyDir   string
	keyFile  string
	api      int
	health   int
	metrics  int
	cmd      *exec.Cmd
	done     chan error
	mu       sync.Mutex
	logs     bytes.Buffer
	devKey   *auth.DevKey
	authCfg  auth.Config
	Base     string
	Public   *public.ClientWithResponses
	Admin    *admin.ClientWithResponses
	extraArg []string
	// binary is the fleet-manager that start runs: fleetManagerBinary
	// unless a test runs another release's.
	binary string
}

func startFleetManager(t *testing.T, hydra *hydratest.Hydra, extra ...string) *fleetManager {
	t.Helper()
	return startFleetManagerOn(t, hydra, pgtest.NewDatabase(t), extra...)
}

// startFleetManagerOn is startFleetManager on the database db.
func startFleetManagerOn(t testing.TB, hydra *hydratest.Hydra, db postgres.Config, extra ...string) *fleetManager {
	t.Helper()
	fm := newFleetManagerOn(t, hydra, db, extra...)
	fm.start()
	return fm
}

// newFleetManagerOn is startFleetManagerOn without the start: a test may
// choose its binary first.
func newFleetManagerOn(t testing.TB, hydra *hydratest.Hydra, db postgres.Config, extra ...string) *fleetManager {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "master.key")
	if err := secrets.GenerateKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	fm := &fleetManager{t: t, db: db, hydra: hydra, keyDir: t.TempDir(), keyFile: keyFile,
		api: freePort(t), health: freePort(t), metrics: freePort(t), extraArg: extra}
	devKey, err := auth.EnsureDevKey(fm.keyDir)
	if err != nil {
		t.Fatal(err)
	}
	fm.devKey, fm.authCfg = devKey, auth.DefaultConfig()
	fm.clients()
	t.Cleanup(func() { fm.stop() })
	return fm
}

// sibling is another replica of fm, not yet started, running binary: the
// same database, master key and signing keys, its own ports.
func (fm *fleetManager) sibling(binary string) *fleetManager {
	fm.t.Helper()
	s := &fleetManager{t: fm.t, db: fm.db, hydra: fm.hydra, keyDir: fm.keyDir, keyFile: fm.keyFile,
		api: freePort(fm.t), health: freePort(fm.t), metrics: freePort(fm.t), extraArg: fm.extraArg,
		devKey: fm.devKey, authCfg: fm.authCfg, binary: binary}
	s.clients()
	fm.t.Cleanup(func() { s.stop() })
	return s
}

// clients points Base and the generated clients at the API port.
func (fm *fleetManager) clients() {
	fm.t.Helper()
	var err error
	fm.Base = fmt.Sprintf("http://127.0.0.1:%d/api/fleet_manager/v1", fm.api)
	if fm.Public, err = public.NewClientWithResponses(fm.Base); err != nil {
		fm.t.Fatal(err)
	}
	if fm.Admin, err = admin.NewClientWithResponses(fm.Base); err != nil {
		fm.t.Fatal(err)
	}
}

func (fm *fleetManager) args() []string {
	args := e2estack.Serve{DBHost: fm.db.Host, DBPort: fm.db.Port, DBUser: fm.db.User, DBName: fm.db.Name,
		API: fm.api, Health: fm.health, Metric: fm.metrics, KeyFile: fm.keyFile, DevKeyDir: fm.keyDir,
		JWKSURL: fm.hydra.JWKSURL(), Issuer: fm.hydra.Issuer()}.Args()
	args = append(args, "--hub-heartbeat-timeout=4s", "--reconcile-resync-interval=5s", "--reconcile-lease=5s",
		"--reconcile-removal-timeout=2m",
		// Above the 5 s net/http gives a connection accepted but not yet read
		// (an agent request cancelled mid-dial) before Shutdown counts it idle.
		"--shutdown-timeout=15s")
	return append(args, fm.extraArg...)
}

// start runs serve and waits until it is ready.
func (fm *fleetManager) start() {
	fm.t.Helper()
	binary := fm.binary
	if binary == "" {
		binary = fleetManagerBinary
	}
	fm.cmd = exec.Command(binary, fm.args()...)
	fm.cmd.Stderr = e2estack.LockedWriter{Mu: &fm.mu, W: &fm.logs}
	fm.cmd.Stdout = e2estack.LockedWriter{Mu: &fm.mu, W: &fm.logs}
	if err := fm.cmd.Start(); err != nil {
		fm.t.Fatalf("starting fleet-manager: %v", err)
	}
	fm.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(fm.cmd, fm.done)
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", fm.health)
	gomega.NewWithT(fm.t).Eventually(func() int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(gomega.Equal(http.StatusOK),
		// A function, so that the log is read when the wait has failed.
		func() string { return "fleet-manager never became ready; log:\n" + fm.Logs() })
}

// stop sends SIGTERM and waits for a clean exit.
func (fm *fleetManager) stop() {
	if fm.cmd == nil || fm.cmd.Process == nil {
		return
	}
	_ = fm.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-fm.done:
		if err != nil {
			fm.t.Errorf("fleet-manager exited with %v after SIGTERM; log:\n%s", err, fm.Logs())
		}
	case <-time.After(30 * time.Second):
		_ = fm.cmd.Process.Kill()
		fm.t.Errorf("fleet-manager did not stop within 30 s of SIGTERM")
	}
	fm.cmd = nil
}

// Logs returns what serve logged so far.
func (fm *fleetManager) Logs() string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return fm.logs.String()
}

// token mints a user token for the fleet manager's development key.
func (fm *fleetManager) token(org, user string, roles ...string) string {
	fm.t.Helper()
	tok, err := fm.devKey.Mint(fm.authCfg, auth.TokenRequest{OrgID: org, Username: user, Roles: roles, TTL: time.Hour,
		Audience: audience}, time.Now())
	if err != nil {
		fm.t.Fatal(err)
	}
	return tok
}

// The helpers the end-to-end binaries share, by their names here.
var (
	bearer   = e2estack.Bearer
	freePort = e2estack.FreePort
)
