package httpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

func probe(t *testing.T, url string) (int, httpserve.HealthStatus) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var body httpserve.HealthStatus
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp.StatusCode, body
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxy, cfg := pgtest.NewProxy(t, pgtest.NewDatabase(t))
	cfg.ConnectTimeout = time.Second
	db := pgtest.Open(t, cfg)
	logs := &logtest.Buffer{}
	ts := httptest.NewServer(httpserve.NewHealthHandler(db, 2*time.Second, httpserve.WithHealthLog(slog.New(slog.NewJSONHandler(logs, nil)))))
	t.Cleanup(ts.Close)

	behind := "database schema is older than this binary: run `fleet-manager migrate`"
	steps := []struct {
		name   string
		act    func()
		status int
		reason string
	}{
		{"schema behind (fresh database)", func() {}, http.StatusServiceUnavailable, behind},
		{"migrated", func() { mustMigrate(t, ctx, db) }, http.StatusOK, ""},
		{"database stopped", func() { proxy.Stop() }, http.StatusServiceUnavailable, "database unreachable"},
		{"database back", func() { proxy.Start() }, http.StatusOK, ""},
		{"schema rolled back", func() { mustRollback(t, ctx, db) }, http.StatusServiceUnavailable, behind},
	}
	for _, s := range steps {
		s.act()
		if status, body := probe(t, ts.URL+httpserve.ReadinessPath); status != s.status || body.Reason != s.reason {
			t.Errorf("%s: GET /readyz = %d %+v, want %d with reason %q", s.name, status, body, s.status, s.reason)
		}
		// Liveness never depends on the database.
		if status, _ := probe(t, ts.URL+httpserve.LivenessPath); status != http.StatusOK {
			t.Errorf("%s: GET /healthz = %d, want 200", s.name, status)
		}
	}
}

// TestReadinessNamesNoServer: the 503 of an unreachable database names
// neither its server, user nor database; the log does.
func TestReadinessNamesNoServer(t *testing.T) {
	t.Parallel()
	proxy, cfg := pgtest.NewProxy(t, pgtest.NewDatabase(t))
	cfg.ConnectTimeout = time.Second
	logs := &logtest.Buffer{}
	ts := httptest.NewServer(httpserve.NewHealthHandler(pgtest.Open(t, cfg), 2*time.Second, httpserve.WithHealthLog(slog.New(slog.NewJSONHandler(logs, nil)))))
	t.Cleanup(ts.Close)
	proxy.Stop()
	resp, err := http.Get(ts.URL + httpserve.ReadinessPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	port := strconv.Itoa(cfg.Port)
	for _, secret := range []string{cfg.User, cfg.Name, cfg.Host, port} {
		if strings.Contains(string(body), secret) {
			t.Errorf("GET /readyz = %d %s: names %q", resp.StatusCode, body, secret)
		}
	}
	if !strings.Contains(logs.String(), port) || !strings.Contains(logs.String(), `"msg":"not ready"`) {
		t.Errorf("log = %s, want the cause with the server's address", logs)
	}
}

// TestReadinessOfAFleetError: a *fleet.Error answers with its message and
// logs its cause; any other error answers with itself. No database: this is
// what the agent's probe does.
func TestReadinessOfAFleetError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		err        error
		wantReason string
		wantLogged string
	}{
		{"fleet error", &fleet.Error{Code: fleet.CodeUnavailable, Message: "database unreachable", Err: errors.New("dial tcp db.example:5432: connection refused")},
			"database unreachable", "dial tcp db.example:5432: connection refused"},
		{"plain error", errors.New("waiting for the hub's lease"), "waiting for the hub's lease", "waiting for the hub's lease"},
	} {
		logs := &logtest.Buffer{}
		ts := httptest.NewServer(httpserve.NewHealthHandler(notReady{tt.err}, time.Second, httpserve.WithHealthLog(slog.New(slog.NewJSONHandler(logs, nil)))))
		status, body := probe(t, ts.URL+httpserve.ReadinessPath)
		ts.Close()
		if status != http.StatusServiceUnavailable || body != (httpserve.HealthStatus{Status: "unavailable", Reason: tt.wantReason}) {
			t.Errorf("%s: GET /readyz = %d %+v, want 503 with reason %q", tt.name, status, body, tt.wantReason)
		}
		if !strings.Contains(logs.String(), tt.wantLogged) {
			t.Errorf("%s: log = %s, want it to contain %q", tt.name, logs, tt.wantLogged)
		}
	}
}

type notReady struct{ err error }

func (n notReady) Ready(context.Context) error { return n.err }

func mustMigrate(t *testing.T, ctx context.Context, db *postgres.DB) {
	t.Helper()
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(): %v", err)
	}
}

func mustRollback(t *testing.T, ctx context.Context, db *postgres.DB) {
	t.Helper()
	if err := db.RollbackAll(ctx); err != nil {
		t.Fatalf("RollbackAll(): %v", err)
	}
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	bound, err := httpserve.Bind(httpserve.Listener{Name: "api", Address: "127.0.0.1:0", Server: httpserve.NewHTTPServer(httpserve.DefaultTimeouts(), handler, discard())})
	if err != nil {
		t.Fatalf("Bind(): %v", err)
	}
	addr := bound[0].Addr()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpserve.Serve(ctx, discard(), 10*time.Second, bound...) }()

	inflight := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			inflight <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		inflight <- string(b)
	}()
	<-started
	cancel() // what SIGTERM does in serve
	waitRefused(t, addr)
	close(release)
	if got := <-inflight; got != "finished" {
		t.Errorf("in-flight request during shutdown = %q, want it finished", got)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve() after shutdown = %v, want nil", err)
	}
}

// waitRefused polls until the listener refuses new connections.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	accepts := func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
	gomega.NewWithT(t).Eventually(accepts).WithTimeout(5*time.Second).WithPolling(10*time.Millisecond).
		Should(gomega.BeFalse(), "%s still accepts connections after shutdown began", addr)
}

func TestBindRefusesTakenPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	_ = free.Close()
	_, err = httpserve.Bind(httpserve.Listener{Name: "health", Address: freeAddr, Flag: "health-bind-address", Server: &http.Server{}},
		httpserve.Listener{Name: "api", Address: ln.Addr().String(), Flag: "api-bind-address", Server: &http.Server{}})
	var opErr *net.OpError
	if !errors.As(err, &opErr) || !strings.HasPrefix(err.Error(), "--api-bind-address: ") {
		t.Errorf("Bind(taken port) = %v, want a listen error naming --api-bind-address", err)
	}
	// The socket bound before the failure is closed again.
	again, err := net.Listen("tcp", freeAddr)
	if err != nil {
		t.Errorf("Bind(taken port) left %s bound: %v", freeAddr, err)
	} else {
		_ = again.Close()
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
