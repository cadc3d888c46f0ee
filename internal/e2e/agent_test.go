package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// runningAgent is one fleetshard-sync run in-process; stop ends it as a
// process exit would, and a new start is a restarted agent.
type runningAgent struct {
	cancel context.CancelFunc
	done   chan error
}

// agentCredentials is a Hydra client for a hub's agent.
type agentCredentials struct {
	clientID   string
	secretFile string
}

func newAgentCredentials(t *testing.T, hydra *hydratest.Hydra, clientID string) agentCredentials {
	t.Helper()
	secret := "secret-of-" + clientID
	hydra.CreateClient(t, clientID, secret, audience)
	file := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return agentCredentials{clientID: clientID, secretFile: file}
}

// startAgent runs the agent of hubID against fm and the test hub, with its
// token from Hydra by client credentials.
func startAgent(t *testing.T, fm *fleetManager, hub *hubtest.Hub, hubID string, creds agentCredentials) *runningAgent {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.FleetManagerURL, cfg.HubID = fm.Base, hubID
	cfg.OIDCTokenURL, cfg.OIDCClientID, cfg.OIDCClientSecretFile, cfg.OIDCAudience = fm.hydra.TokenURL(), creds.clientID, creds.secretFile, audience
	cfg.PollWait, cfg.HeartbeatInterval = 2*time.Second, time.Second
	// A deletion waits on OCM's registration controller to remove its
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
	a := agent.New(cfg, fc, h, agent.Options{Version: "e2e", StartGeneration: time.Now().UnixNano(),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), Metrics: metrics, Clock: fleet.SystemClock{}})
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningAgent{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *runningAgent) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel = nil
}

// testWriter sends the agent's warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
