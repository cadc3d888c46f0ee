package promtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Exporter is a scrape target serving a body the test sets, in the
// Prometheus text format, at /metrics. It stops when the test ends.
type Exporter struct {
	server *httptest.Server
	mu     sync.Mutex
	body   string
	scrape int
}

// NewExporter starts an exporter serving an empty body.
func NewExporter(t testing.TB) *Exporter {
	t.Helper()
	e := &Exporter{}
	e.server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.server.Close)
	return e
}

func (e *Exporter) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	e.mu.Lock()
	body := e.body
	e.scrape++
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = fmt.Fprint(w, body)
}

// Set replaces the body the next scrapes get: series in the text format,
// each line ending with a newline.
func (e *Exporter) Set(body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.body = body
}

// Scrapes returns how many times /metrics was read.
func (e *Exporter) Scrapes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.scrape
}

// URL returns the URL of /metrics.
func (e *Exporter) URL() string { return e.server.URL + "/metrics" }

// Host returns host:port, a static_configs target.
func (e *Exporter) Host() string {
	u, _ := url.Parse(e.server.URL)
	return u.Host
}

// ScrapeConfig returns a scrape_configs item for job scraping the exporter
// every second. honor_labels keeps the series' own labels (a clusterID, a
// job or instance they carry) as the exporter serves them.
func (e *Exporter) ScrapeConfig(job string) string {
	return fmt.Sprintf("- job_name: %q\n  honor_labels: true\n  scrape_interval: 1s\n  metrics_path: /metrics\n  static_configs:\n  - targets: [%q]\n",
		job, e.Host())
}
