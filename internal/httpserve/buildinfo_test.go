package httpserve_test

import (
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/version"
)

// TestBuildInfoIsServed: the gauge reaches /metrics under the namespace, at
// 1, with the linker's version and commit and the Go release.
func TestBuildInfoIsServed(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if err := reg.Register(httpserve.NewBuildInfo("fleet_manager")); err != nil {
		t.Fatalf("Register(build_info): %v", err)
	}
	srv := httptest.NewServer(httpserve.NewMetricsHandler(reg, false))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	want := `fleet_manager_build_info{commit="` + version.Commit + `",goversion="` + runtime.Version() +
		`",version="` + version.Version + `"} 1`
	if !strings.Contains(string(body), want+"\n") {
		t.Errorf("GET /metrics has no line %q:\n%s", want, body)
	}
	if !strings.Contains(string(body), "# TYPE fleet_manager_build_info gauge\n") {
		t.Errorf("GET /metrics: fleet_manager_build_info is not typed a gauge:\n%s", body)
	}
}
