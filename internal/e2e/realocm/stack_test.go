package realocm

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/e2e/e2estack"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// What follows is the part of internal/e2e's harness this test needs: the
// fleet-manager binary serving a database of its own, and the agent run
// in-process with a Hydra client's token, wired as internal/e2e wires them.

const audience = e2estack.Audience

// fleetManager is the fleet-manager binary serving one database.
type fleetManager struct {
	t       *testing.T
	cmd     *exec.Cmd
	done    chan error
	mu      sync.Mutex
	logs    bytes.Buffer
	hydra   *hydratest.Hydra
	devKey  *auth.DevKey
	authCfg auth.Config
	Base    string
	Public  *public.ClientWithResponses
	Admin   *admin.ClientWithResponses
}

// startFleetManager starts serve with extra flags after the harness's own.
func startFleetManager(t *testing.T, hydra *hydratest.Hydra, extra ...string) *fleetManager {
	t.Helper()
	db := pgtest.NewDatabase(t)
	keyFile := filepath.Join(t.TempDir(), "master.key")
	if err := secrets.GenerateKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	keyDir := t.TempDir()
	devKey, err := auth.EnsureDevKey(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	api, health, metrics := freePort(t), freePort(t), freePort(t)
	fm := &fleetManager{t: t, hydra: hydra, devKey: devKey, authCfg: auth.DefaultConfig(),
		Base: fmt.Sprintf("http://127.0.0.1:%d/api/fleet_manager/v1", api)}
	if fm.Public, err = public.NewClientWithResponses(fm.Base); err != nil {
		t.Fatal(err)
	}
	if fm.Admin, err = admin.NewClientWithResponses(fm.Base); err != nil {
		t.Fatal(err)
	}
	args := e2estack.Serve{DBHost: db.Host, DBPort: db.Port, DBUser: db.User, DBName: db.Name,
		API: api, Health: health, Metric: metrics, KeyFile: keyFile, DevKeyDir: keyDir,
		JWKSURL: hydra.JWKSURL(), Issuer: hydra.Issuer()}.Args()
	fm.cmd = exec.Command(fleetManagerBinary, append(args, "--hub-heartbeat-timeout=4s", "--reconcile-resync-interval=5s", "--reconcile-lease=5s",
		"--reconcile-removal-timeout=5m", "--shutdown-timeout=15s")...)
	fm.cmd.Args = append(fm.cmd.Args, extra...)
	fm.cmd.Stdout = e2estack.LockedWriter{Mu: &fm.mu, W: &fm.logs}
	fm.cmd.Stderr = e2estack.LockedWriter{Mu: &fm.mu, W: &fm.logs}
	if err := fm.cmd.Start(); err != nil {
		t.Fatalf("starting fleet-manager: %v", err)
	}
	fm.done = make(chan error, 1)
	go func() { fm.done <- fm.cmd.Wait() }()
	t.Cleanup(fm.stop)
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	waitUntil(t, time.Minute, "fleet-manager ready", func() error {
		resp, err := http.Get(ready) //nolint:gosec // the test's own loopback address
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d; log:\n%s", resp.StatusCode, fm.Logs())
		}
		return nil
	})
	return fm
}

// stop sends SIGTERM and waits for a clean exit.
func (fm *fleetManager) stop() {
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

// startAgent runs the agent of hubID in-process against fm and hub, with
// its token from a Hydra client of its own by client credentials; the
// test's cleanup stops it.
func startAgent(t *testing.T, fm *fleetManager, hub *hubtest.Hub, hubID, clientID string) {
	t.Helper()
	secret := "secret-of-" + clientID
	fm.hydra.CreateClient(t, clientID, secret, audience)
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.FleetManagerURL, cfg.HubID = fm.Base, hubID
	cfg.OIDCTokenURL, cfg.OIDCClientID, cfg.OIDCClientSecretFile, cfg.OIDCAudience = fm.hydra.TokenURL(), clientID, secretFile, audience
	cfg.PollWait, cfg.HeartbeatInterval = 2*time.Second, time.Second
	// The deletion waits on OCM's registration controller to remove its
	// finalizers, which it does within a sync or two.
	cfg.InventoryBatchDelay, cfg.ResyncInterval, cfg.DeletionTimeout = 100*time.Millisecond, time.Minute, 2*time.Minute
	h, err := agent.NewHub(hub.RESTConfig())
	if err != nil {
		t.Fatalf("agent.NewHub(): %v", err)
	}
	fc, err := agent.NewFleetClient(cfg.FleetManagerURL, hubID, agent.NewHTTPClient(cfg, agent.NewTokenSource(cfg, agent.NewTokenHTTPClient())))
	if err != nil {
		t.Fatalf("agent.NewFleetClient(): %v", err)
	}
	metrics, err := agent.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(cfg, fc, h, agent.Options{Version: "e2e-realocm", StartGeneration: time.Now().UnixNano(),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), Metrics: metrics, Clock: fleet.SystemClock{}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitUntil polls check until it passes, failing the test at timeout with
// check's last error.
func waitUntil(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		}
		<-tick.C
	}
}

// testWriter sends the agent's warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// The helpers the end-to-end binaries share, by their names here.
var (
	bearer   = e2estack.Bearer
	freePort = e2estack.FreePort
)

func ptr[T any](v T) *T { return &v }
