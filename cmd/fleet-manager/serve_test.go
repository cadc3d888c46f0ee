package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// execute runs the root command to completion.
func execute(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut logtest.Buffer
	cmd := newRootCommand(&out, &errOut, mapEnv(env))
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// dbFlags points a command at cfg's database.
func dbFlags(cfg postgres.Config) []string {
	return []string{"--db-host=" + cfg.Host, "--db-port=" + strconv.Itoa(cfg.Port), "--db-user=" + cfg.User,
		"--db-name=" + cfg.Name, "--db-password=" + cfg.Password}
}

// keyFlag creates a master key file and returns the flag naming it.
func keyFlag(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "master.key")
	if err := secrets.GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	return "--encryption-key-file=" + path
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newServePorts returns three free ports, distinct: each is held open until
// all three are taken, so the kernel cannot hand one out twice.
func newServePorts(t *testing.T) servePorts {
	t.Helper()
	var ports [3]int
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return servePorts{ports[0], ports[1], ports[2]}
}

// servePorts are the three ports of one `serve`.
type servePorts struct{ api, metrics, health int }

func (p servePorts) flags() []string {
	return []string{
		fmt.Sprintf("--api-bind-address=127.0.0.1:%d", p.api),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p.metrics),
		fmt.Sprintf("--health-bind-address=127.0.0.1:%d", p.health),
	}
}

// startServe runs `serve` in the background until the returned stop is called;
// stop cancels its context, as SIGTERM does, and returns its error.
func startServe(t *testing.T, env map[string]string, args ...string) (logs *logtest.Buffer, stop func() error) {
	t.Helper()
	logs = &logtest.Buffer{}
	cmd := newRootCommand(io.Discard, logs, mapEnv(env))
	cmd.SetArgs(append([]string{"serve"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return logs, stop
}

// waitHTTP polls url until it answers want or the deadline passes.
func waitHTTP(t *testing.T, url string, want int) {
	t.Helper()
	status := func() int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	gomega.NewWithT(t).Eventually(status).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).
		Should(gomega.Equal(want), "GET %s", url)
}

func TestServeRefusesAnOlderSchema(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	args := append([]string{"serve", "--auth-dev-key-dir=" + t.TempDir(), keyFlag(t)}, dbFlags(cfg)...)
	args = append(args, newServePorts(t).flags()...)
	_, _, err := execute(t, nil, args...)
	if err == nil || !strings.Contains(err.Error(), "run `fleet-manager migrate`") {
		t.Errorf("serve on an unmigrated database = %v, want a refusal that says to migrate", err)
	}
}

func TestMigrateThenServe(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	keyDir := t.TempDir()
	out, _, err := execute(t, nil, append([]string{"migrate"}, dbFlags(cfg)...)...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("%d migrations applied", len(migrations.IDs()))) {
		t.Fatalf("migrate = %q, %v", out, err)
	}
	ports := newServePorts(t)
	env := map[string]string{"FLEET_MANAGER_DB_DEBUG": "true"}
	logs, stop := startServe(t, env, append(append(dbFlags(cfg), ports.flags()...), "--auth-dev-key-dir="+keyDir, keyFlag(t))...)
	health := fmt.Sprintf("http://127.0.0.1:%d", ports.health)
	waitHTTP(t, health+"/readyz", http.StatusOK)

	token, _, err := execute(t, nil, "token", "--auth-dev-key-dir="+keyDir, "--org=org-42", "--user=ann", "--roles=fleet-admin")
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/fleet_manager/v1/current_user", ports.api), nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET current_user: %v", err)
	}
	var user struct {
		OrgID    string   `json:"org_id"`
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&user)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || user.OrgID != "org-42" || user.Username != "ann" || len(user.Roles) != 1 {
		t.Errorf("GET current_user with a minted token = %d %+v, want 200 org-42 ann [fleet-admin]", resp.StatusCode, user)
	}

	metrics := httpGetBody(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.metrics))
	for _, want := range []string{
		`fleet_manager_api_inbound_requests_total{code="200",method="GET",route="/api/fleet_manager/v1/current_user"} 1`,
		"go_goroutines", "go_sql_max_open_connections", "process_resident_memory_bytes",
		// The test binary's build: the linker set nothing, so the defaults.
		`fleet_manager_build_info{commit="unknown",goversion="` + runtime.Version() + `",version="dev"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("serve after shutdown = %v, want nil", err)
	}
	for _, want := range []string{`"msg":"sql"`, "SELECT id FROM migrations", `"msg":"shutdown complete"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("serve's log lacks %q (FLEET_MANAGER_DB_DEBUG=true logs every statement)", want)
		}
	}
	checkRequestLine(t, logs.String(), "/api/fleet_manager/v1/current_user")
	if strings.Contains(logs.String(), strings.TrimSpace(token)) {
		t.Errorf("serve's log contains the bearer token")
	}
}

func TestServeFailsCleanlyWithoutJWKS(t *testing.T) {
	t.Parallel()
	_, cfg := pgtest.NewMigratedDatabase(t)
	ports := newServePorts(t)
	args := append(append([]string{"serve", keyFlag(t)}, dbFlags(cfg)...), ports.flags()...)
	args = append(args, fmt.Sprintf("--auth-jwks-url=http://127.0.0.1:%d/jwks.json", freePort(t)), "--auth-issuers=https://sso.example.com")
	_, _, err := execute(t, nil, args...)
	if err == nil || !strings.Contains(err.Error(), "jwks") {
		t.Errorf("serve with an unreachable JWKS = %v, want an error about the JWKS", err)
	}
}

func TestServeMigrateOnStart(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	ports := newServePorts(t)
	args := append(append(dbFlags(cfg), ports.flags()...), "--auth-dev-key-dir="+t.TempDir(), "--migrate-on-start", keyFlag(t))
	_, stop := startServe(t, nil, args...)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports.health), http.StatusOK)
	if err := stop(); err != nil {
		t.Errorf("serve --migrate-on-start after shutdown = %v", err)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, _, err := execute(t, nil, "version")
	if err != nil || !strings.HasPrefix(out, "fleet-manager dev (commit unknown, go1.") {
		t.Errorf("version = %q, %v", out, err)
	}
}

func httpGetBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// checkRequestLine finds the request line of path in a JSON log: its elapsed
// is a duration as a reader writes it, and its elapsed_ms the same number of
// milliseconds.
func checkRequestLine(t *testing.T, log, path string) {
	t.Helper()
	for line := range strings.Lines(log) {
		var rec struct {
			Msg       string  `json:"msg"`
			Path      string  `json:"path"`
			Elapsed   string  `json:"elapsed"`
			ElapsedMS float64 `json:"elapsed_ms"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request" || rec.Path != path {
			continue
		}
		d, err := time.ParseDuration(rec.Elapsed)
		if err != nil || config.HumanDuration(d) != rec.Elapsed {
			t.Errorf("request line %s: elapsed %q is not a rounded duration (%v)", line, rec.Elapsed, err)
		}
		if ms := float64(d) / float64(time.Millisecond); rec.ElapsedMS <= 0 || math.Abs(ms-rec.ElapsedMS) > ms/100+0.001 {
			t.Errorf("request line %s: elapsed_ms %v, want about %v (elapsed %s)", line, rec.ElapsedMS, ms, rec.Elapsed)
		}
		return
	}
	t.Errorf("no request line for %s in the log:\n%s", path, log)
}
