package templates_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/usermetrics"
)

// recorder is a Registerer that notes the type of every collector
// registered through it before passing it on: a vector with no child yet
// gathers nothing, so the names of what the service exports come from the
// registrations, not from a scrape.
type recorder struct {
	reg   *prometheus.Registry
	types map[string]dto.MetricType
	err   error
}

func (r *recorder) Register(c prometheus.Collector) error {
	var typ *dto.MetricType
	switch c.(type) {
	case *prometheus.CounterVec:
		typ = dto.MetricType_COUNTER.Enum()
	case *prometheus.GaugeVec:
		typ = dto.MetricType_GAUGE.Enum()
	case *prometheus.HistogramVec:
		typ = dto.MetricType_HISTOGRAM.Enum()
	case *prometheus.SummaryVec:
		typ = dto.MetricType_SUMMARY.Enum()
	}
	if typ != nil {
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				r.err = errors.Join(r.err, errors.New("no fqName in "+d.String()))
				continue
			}
			r.types[m[1]] = *typ
		}
	}
	return r.reg.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// fqName reads a descriptor's full name from its String(), the only place
// client_golang shows it.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// noDatabase stands in for the pool: the database/sql collector reads only
// the pool's statistics, which need no connection.
type noDatabase struct{}

func (noDatabase) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("no database")
}
func (noDatabase) Driver() driver.Driver { return nil }

// exportedMetrics returns the name of every series `fleet-manager serve`
// exports under the default --service-name, histograms' _bucket, _sum and
// _count included: the collectors serve registers (cmd/fleet-manager's
// newRegistry and the metrics its container provides), each made by its
// own constructor. The read replica's metrics, registered only when a
// replica is configured, are not among them.
func exportedMetrics(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	cfg := rest.DefaultConfig()
	ns := cfg.MetricsNamespace()
	r := &recorder{reg: prometheus.NewRegistry(), types: map[string]dto.MetricType{}}
	db := sql.OpenDB(noDatabase{})
	t.Cleanup(func() { _ = db.Close() })
	r.MustRegister(httpserve.NewBuildInfo(ns), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewDBStatsCollector(db, "fleet_manager"))
	if _, err := rest.NewHTTPMetrics(cfg, r); err != nil {
		t.Fatalf("rest.NewHTTPMetrics: %v", err)
	}
	if _, err := reconcile.NewMetrics(ns, r); err != nil {
		t.Fatalf("reconcile.NewMetrics: %v", err)
	}
	if _, err := authz.NewMetrics(ns, r); err != nil {
		t.Fatalf("authz.NewMetrics: %v", err)
	}
	if _, err := syncset.NewMetrics(ns, r); err != nil {
		t.Fatalf("syncset.NewMetrics: %v", err)
	}
	if _, err := usermetrics.NewMetrics(ns, r); err != nil {
		t.Fatalf("usermetrics.NewMetrics: %v", err)
	}
	return r.names(t)
}

// names returns the name of every series of what was registered through
// r, histograms' _bucket, _sum and _count included.
func (r *recorder) names(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		r.types[f.GetName()] = f.GetType()
	}
	names := map[string]dto.MetricType{}
	for name, typ := range r.types {
		switch typ {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[name+suffix] = typ
			}
		case dto.MetricType_SUMMARY:
			for _, suffix := range []string{"", "_sum", "_count"} {
				names[name+suffix] = typ
			}
		default:
			names[name] = typ
		}
	}
	return names
}

// selectedMetrics returns the metric name of every series selector of a
// PromQL expression; "" for a selector that names no metric.
func selectedMetrics(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, selector := range parser.ExtractSelectors(e) {
		name := ""
		for _, m := range selector {
			if m.Name == "__name__" && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		names = append(names, name)
	}
	return names, nil
}

// metricNames is selectedMetrics for a test: it fails the test when the
// expression does not parse or selects series without naming a metric.
func metricNames(t *testing.T, what, expr string) []string {
	t.Helper()
	names, err := selectedMetrics(expr)
	if err != nil {
		t.Errorf("%s: ParseExpr(%q): %v", what, expr, err)
	}
	for _, name := range names {
		if name == "" {
			t.Errorf("%s: %q selects series without naming a metric", what, expr)
		}
	}
	return names
}

// TestExportedMetricsAreRead shows that the list the dashboard and the
// rules are checked against is the real one: it holds each kind of name
// (a counter, a histogram's series, a gauge, a pool and a runtime metric)
// and nothing the service does not export.
func TestExportedMetricsAreRead(t *testing.T) {
	t.Parallel()
	got := exportedMetrics(t)
	for _, want := range []string{
		"fleet_manager_build_info", "fleet_manager_api_inbound_requests_total",
		"fleet_manager_api_inbound_request_duration_seconds_bucket", "fleet_manager_reconcile_duration_seconds_count",
		"fleet_manager_reconcile_queue_depth", "fleet_manager_dns_record_changes_total", "fleet_manager_authz_decision_duration_seconds_sum",
		"fleet_manager_user_metrics_shared_identity_clusters_total", "go_sql_in_use_connections", "go_goroutines", "process_resident_memory_bytes",
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("exportedMetrics() lacks %s", want)
		}
	}
	for _, absent := range []string{"fleet_manager_api_inbound_request_duration_seconds", "fleet_manager_reconcile_queue_depth_count", "fleet_manager_db_reads_total"} {
		if _, ok := got[absent]; ok {
			t.Errorf("exportedMetrics() has %s, which the service does not export", absent)
		}
	}
	if t.Failed() {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("exported: %v", names)
	}
}
