// Package e2estack holds what the end-to-end test binaries share to run the
// real fleet-manager binary: building it once, the flags that point serve
// at a test database, the test issuer and free loopback ports, and the small
// helpers around them. internal/e2e uses it, and so can another end-to-end
// binary that needs a hub of its own.
package e2estack

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// Audience is the audience serve requires and the tests' tokens carry.
const Audience = "fleet-manager"

// BuildFleetManager builds cmd/fleet-manager (pkg, relative to the calling
// test's folder) into a new temporary folder, for a TestMain; remove
// removes the folder.
func BuildFleetManager(pkg string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "fm-e2e-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("e2estack: %w", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "fleet-manager")
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("e2estack: go build fleet-manager: %v\n%s", err, out)
	}
	return bin, remove, nil
}

// Serve says where one serve listens and what it trusts. It names the
// database and the issuer by value, so that this package imports no
// adapter (internal/fleet's architecture test).
type Serve struct {
	DBHost, DBUser, DBName string
	DBPort                 int
	API, Health, Metric    int // loopback ports
	KeyFile, DevKeyDir     string
	JWKSURL, Issuer        string // the test issuer's (Hydra's)
}

// Args are serve's flags for s: the database (migrated on start), JSON
// logs, the three ports, the master key, the development key and the Hydra
// issuer. Callers add their timings.
func (s Serve) Args() []string {
	return []string{"serve", "--migrate-on-start", "--log-format=json", "--log-level=info",
		"--db-host=" + s.DBHost, "--db-port=" + strconv.Itoa(s.DBPort), "--db-user=" + s.DBUser, "--db-name=" + s.DBName,
		fmt.Sprintf("--api-bind-address=127.0.0.1:%d", s.API), fmt.Sprintf("--health-bind-address=127.0.0.1:%d", s.Health),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", s.Metric),
		"--encryption-key-file=" + s.KeyFile, "--auth-dev-key-dir=" + s.DevKeyDir,
		"--auth-jwks-url=" + s.JWKSURL, "--auth-issuers=" + s.Issuer, "--auth-audience=" + Audience,
		// Hydra puts the client id of a client-credentials token in client_id.
		"--auth-agent-claims=client_id",
	}
}

// Bearer is a request editor of the generated clients that sends token.
func Bearer(token string) func(context.Context, *http.Request) error {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// LockedWriter writes into W under Mu: a child process's output read while
// it runs.
type LockedWriter struct {
	Mu *sync.Mutex
	W  *bytes.Buffer
}

func (l LockedWriter) Write(p []byte) (int, error) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return l.W.Write(p)
}

// FreePort returns a loopback port free at the time of the call and not
// returned before in this process (childproc.FreePorts).
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}
