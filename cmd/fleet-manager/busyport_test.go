package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestServeOnABusyPortReportsOnlyThePort runs the real binary, reconcilers
// on, with its API port taken: the one error it reports names the flag and
// the address in use, and nothing cut short on the way out is logged as an
// error before it.
func TestServeOnABusyPortReportsOnlyThePort(t *testing.T) {
	t.Parallel()
	binary := filepath.Join(t.TempDir(), "fleet-manager")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, cfg := pgtest.NewMigratedDatabase(t)
	ports := newServePorts(t)
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports.api))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := &logtest.Buffer{}
	cmd := exec.CommandContext(ctx, binary, append(append([]string{"serve", "--auth-dev-key-dir=" + t.TempDir(), keyFlag(t)},
		dbFlags(cfg)...), ports.flags()...)...)
	cmd.Stderr = logs
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve on a busy port exited with %v, want exit code 1; log:\n%s", err, logs.String())
	}
	var errorLines []string
	for line := range strings.Lines(logs.String()) {
		if strings.HasPrefix(line, "Error:") || strings.Contains(line, `"level":"ERROR"`) {
			errorLines = append(errorLines, line)
		}
		if strings.Contains(line, "canceled") {
			t.Errorf("serve on a busy port logged a cancellation: %s", line)
		}
	}
	want := fmt.Sprintf("127.0.0.1:%d", ports.api)
	if len(errorLines) != 1 || !strings.Contains(errorLines[0], "--api-bind-address") ||
		!strings.Contains(errorLines[0], want) || !strings.Contains(errorLines[0], "address already in use") {
		t.Errorf("serve on a busy port reported errors %q; want one, naming --api-bind-address, %s and the address in use; log:\n%s",
			errorLines, want, logs.String())
	}
}
