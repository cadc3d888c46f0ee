package httpserve_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/httpserve"
)

// TestProfilesOnlyWhenAsked: the metrics server answers /debug/pprof/ (the
// index, a heap profile, the command line) only with profiling on; off, the
// default, those paths are 404 and /metrics answers either way.
func TestProfilesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	get := func(t *testing.T, url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: reading: %v", url, err)
		}
		return resp.StatusCode, string(body)
	}
	for _, profiling := range []bool{false, true} {
		srv := httptest.NewServer(httpserve.NewMetricsHandler(prometheus.NewRegistry(), profiling))
		for path, want := range map[string]string{"/debug/pprof/": "heap", "/debug/pprof/heap?debug=1": "heap profile",
			"/debug/pprof/cmdline": "httpserve.test"} {
			status, body := get(t, srv.URL+path)
			switch {
			case profiling && (status != http.StatusOK || !strings.Contains(body, want)):
				t.Errorf("profiling on: GET %s = %d, want 200 with %q:\n%.300s", path, status, want, body)
			case !profiling && status != http.StatusNotFound:
				t.Errorf("profiling off: GET %s = %d, want 404", path, status)
			}
		}
		if status, _ := get(t, srv.URL+"/metrics"); status != http.StatusOK {
			t.Errorf("profiling %v: GET /metrics = %d, want 200", profiling, status)
		}
		srv.Close()
	}
}
