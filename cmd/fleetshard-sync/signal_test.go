package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
)

// The agent's tests share one test hub and one build of the binary.
func TestMain(m *testing.M) {
	code := m.Run()
	hubtest.Stop()
	if binaryPath != "" {
		_ = os.RemoveAll(filepath.Dir(binaryPath))
	}
	os.Exit(code)
}

var (
	buildOnce   sync.Once
	binaryPath  string
	buildOutput []byte
	buildErr    error
)

// agentBinary builds fleetshard-sync once per test binary.
func agentBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleetshard-sync-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binaryPath = filepath.Join(dir, "fleetshard-sync")
		buildOutput, buildErr = exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOutput)
	}
	return binaryPath
}

// holdingFleet is a fleet manager that holds every long-poll for the desired
// set until the agent goes away, and answers everything else 503. inFlight
// receives when a long-poll arrives.
func holdingFleet(t *testing.T) (url string, inFlight <-chan struct{}) {
	t.Helper()
	polls := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/desired") {
			polls <- struct{}{}
			<-r.Context().Done()
			return
		}
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/api/fleet_manager/v1", polls
}

// startAgentProcess runs the real binary against the test hub and fleetURL
// with args added, and returns it with its log.
func startAgentProcess(t *testing.T, fleetURL string, args ...string) (*exec.Cmd, *logtest.Buffer) {
	t.Helper()
	bin := agentBinary(t)
	hubID := fmt.Sprintf("hub-%x", time.Now().UnixNano())
	cmd := exec.Command(bin, append([]string{"run",
		"--fleet-manager-url=" + fleetURL, "--hub-id=" + hubID, "--kubeconfig=" + hubtest.Start(t).Kubeconfig(t),
		"--health-bind-address=" + freeAddr(t), "--metrics-bind-address=" + freeAddr(t),
		"--heartbeat-interval=1s", "--poll-wait=5m", "--lease-retry-period=200ms",
	}, args...)...)
	logs := &logtest.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting fleetshard-sync: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, logs
}

// waitExit waits for the process to exit within bound and returns its exit
// code; it fails the test when the process is still running then.
func waitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration, logs *logtest.Buffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &exit):
			return exit.ExitCode()
		}
		t.Fatalf("fleetshard-sync: %v", err)
	case <-time.After(bound):
		t.Fatalf("fleetshard-sync still running %s after SIGTERM; log:\n%s", bound, logs.String())
	}
	return -1
}

// waitFor waits for ch within a minute.
func waitFor(t *testing.T, ch <-chan struct{}, what string, logs *logtest.Buffer) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute; log:\n%s", what, logs.String())
	}
}

// TestSIGTERMDuringLongPoll sends SIGTERM to the real binary while its
// long-poll for the desired set is in flight: it cancels the poll, releases
// the hub's lease and exits 0, within --shutdown-timeout.
func TestSIGTERMDuringLongPoll(t *testing.T) {
	t.Parallel()
	fleetURL, inFlight := holdingFleet(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	const timeout = 5 * time.Second
	cmd, logs := startAgentProcess(t, fleetURL, "--token-file="+token, fmt.Sprintf("--shutdown-timeout=%s", timeout))
	waitFor(t, inFlight, "long-poll", logs)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if code := waitExit(t, cmd, timeout, logs); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0; log:\n%s", code, logs.String())
	}
	for _, want := range []string{`"msg":"agent stopped"`, `"msg":"shutdown complete"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

// TestSIGTERMBoundsAStuckShutdown sends SIGTERM while the long-poll is in
// flight and the heartbeat waits on an OIDC token endpoint that does not
// answer (the token fetch does not end with the request's context): the
// process does not wait for it past --shutdown-timeout, and exits 1, before
// the pod's grace period would run out.
func TestSIGTERMBoundsAStuckShutdown(t *testing.T) {
	t.Parallel()
	fleetURL, inFlight := holdingFleet(t)
	// The first token lives one second past the agent's early renewal; the
	// next fetch hangs.
	stuck := make(chan struct{}, 16)
	release := make(chan struct{})
	var mu sync.Mutex
	issued := 0
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		issued++
		n := issued
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"tok","token_type":"Bearer","expires_in":31}`)
			return
		}
		stuck <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); tokens.Close() })
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	cmd, logs := startAgentProcess(t, fleetURL, "--oidc-token-url="+tokens.URL, "--oidc-client-id=agent",
		"--oidc-client-secret-file="+secret, fmt.Sprintf("--shutdown-timeout=%s", timeout))
	waitFor(t, inFlight, "long-poll", logs)
	waitFor(t, stuck, "stuck token fetch", logs)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	// The token client gives up only after its own, longer timeout: the
	// shutdown bound must end the process first.
	if code := waitExit(t, cmd, timeout+5*time.Second, logs); code != 1 {
		t.Errorf("exit code after a stuck shutdown = %d, want 1; log:\n%s", code, logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"shutdown did not finish in time, exiting"`) {
		t.Errorf("log lacks the stuck shutdown:\n%s", logs.String())
	}
}
