package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

func envOf(m map[string]string) lookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	root := newRootCommand(&out, io.Discard, envOf(nil))
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil || !strings.HasPrefix(out.String(), "fleetshard-sync ") {
		t.Errorf("version = %q, %v, want fleetshard-sync <version>", out.String(), err)
	}
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	root := newRootCommand(io.Discard, io.Discard, envOf(map[string]string{
		"FLEETSHARD_SYNC_HUB_ID":     "hub_1",
		"FLEETSHARD_SYNC_POLL_WAIT":  "0s",
		"FLEETSHARD_SYNC_LOG_FORMAT": "xml",
	}))
	root.SetArgs([]string{"run", "--fleet-manager-url=https://fleet.example.com/api/fleet_manager/v1", "--poll-wait=30s"})
	err := root.Execute()
	if err == nil {
		t.Fatal("run with a bad hub id = nil, want an error")
	}
	for _, want := range []string{"--hub-id:", "--token-file:", "--log-format:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run error = %v, want it to name %s", err, want)
		}
	}
	// The flag on the command line wins over the environment.
	if strings.Contains(err.Error(), "--poll-wait") {
		t.Errorf("run error = %v, want --poll-wait=30s to win over FLEETSHARD_SYNC_POLL_WAIT=0s", err)
	}
}

// freeAddr is a loopback address on a port childproc.FreePorts hands out:
// below the kernel's ephemeral range, so that no outgoing connection takes
// it before the agent binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// TestRunServesAndStops runs the agent against a fleet manager that always
// fails and a hub that is not there: it keeps running, serves liveness but
// not readiness, and stops cleanly when its context ends (as on SIGTERM).
func TestRunServesAndStops(t *testing.T) {
	t.Parallel()
	fm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer fm.Close()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: agent, user: {token: t}}]
contexts: [{name: hub, context: {cluster: hub, user: agent}}]
current-context: hub
`), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	health, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCommand(io.Discard, io.Discard, envOf(map[string]string{
		"FLEETSHARD_SYNC_FLEET_MANAGER_URL":    fm.URL + "/api/fleet_manager/v1",
		"FLEETSHARD_SYNC_HUB_ID":               "hub-1",
		"FLEETSHARD_SYNC_TOKEN_FILE":           token,
		"FLEETSHARD_SYNC_KUBECONFIG":           kubeconfig,
		"FLEETSHARD_SYNC_HEALTH_BIND_ADDRESS":  health,
		"FLEETSHARD_SYNC_METRICS_BIND_ADDRESS": metrics,
		"FLEETSHARD_SYNC_HEARTBEAT_INTERVAL":   "1s",
	}))
	root.SetArgs([]string{"run"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	gomega.NewWithT(t).Eventually(func() int { return status("http://" + health + "/healthz") }).
		WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(http.StatusOK), "/healthz")
	if got := status("http://" + health + "/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz with neither the fleet manager nor the hub reachable = %d, want 503", got)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), "fleetshard_sync_desired_applied_revision") {
		t.Errorf("/metrics has no fleetshard_sync_ metric:\n%s", body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after its context ended = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop within 20s of its context ending")
	}
}
