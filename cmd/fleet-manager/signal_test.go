package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestSIGTERMFinishesInFlightRequest runs the real binary. A readiness check
// is in flight, waiting on a database that a proxy holds, when SIGTERM comes:
// new connections are refused at once, the in-flight request is answered when
// the database answers, and the process exits 0 after closing the pool.
func TestSIGTERMFinishesInFlightRequest(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	binary := filepath.Join(t.TempDir(), "fleet-manager")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, direct := pgtest.NewMigratedDatabase(t)
	proxy, cfg := pgtest.NewProxy(t, direct)
	ports := newServePorts(t)
	logs := &logtest.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Without reconcilers: their passes at start would reach the held proxy
	// too, and one of theirs, not the readiness check's, could be the
	// statement that shows the request in the handler.
	cmd := exec.CommandContext(ctx, binary, append(append([]string{"serve", "--auth-dev-key-dir=" + t.TempDir(), keyFlag(t),
		"--shutdown-timeout=20s", "--ready-timeout=30s", "--reconcilers=false"}, dbFlags(cfg)...), ports.flags()...)...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting serve: %v", err)
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports.health)
	waitHTTP(t, "http://"+health+"/readyz", http.StatusOK)

	proxy.Hold()
	inflight, wrote := make(chan string, 1), make(chan struct{})
	go func() {
		// The trace says when the request is sent: the held proxy may hold
		// the service's other statements too, so its count alone does not
		// say this request reached the handler.
		trace := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) }})
		req, err := http.NewRequestWithContext(trace, http.MethodGet, "http://"+health+"/readyz", nil)
		if err != nil {
			inflight <- err.Error()
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			inflight <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		inflight <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}()
	// Wait until the request is sent and in the handler: its statement
	// waits in the held proxy. (An open connection alone may not have sent
	// its request yet, and Shutdown closes such a connection as idle.)
	select {
	case <-wrote:
	case <-ctx.Done():
		t.Fatalf("the readiness check was never sent")
	}
	g.Eventually(proxy.Waiting).WithTimeout(10 * time.Second).Should(gomega.BeNumerically(">=", 1))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	g.Eventually(func() error {
		c, err := net.DialTimeout("tcp", health, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(10*time.Second).Should(gomega.HaveOccurred(), "the health server still accepts connections after SIGTERM")
	proxy.Release()
	if got := <-inflight; got != `200 {"status":"ready"}` {
		t.Errorf("in-flight readiness check across SIGTERM = %q, want 200 ready", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v after SIGTERM, want 0; log:\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"shutdown complete"`) {
		t.Errorf("serve's log lacks 'shutdown complete':\n%s", logs.String())
	}
}
