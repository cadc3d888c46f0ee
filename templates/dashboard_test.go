package templates_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

const dashboardFile = "grafana-dashboard.json"

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	// A collapsed row holds its panels.
	Panels []panel `json:"panels"`
}

// grafanaVariable matches Grafana's variables inside a query: $name,
// ${name} and ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$\{?(__[a-z_]+|[a-zA-Z]\w*)(:[a-z]+)?\}?`)

// promQL turns a panel's query into PromQL: the range variables become a
// duration, the others (used inside label matchers) a regular expression
// that matches anything.
func promQL(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__rate_interval") || strings.Contains(v, "__interval") || strings.Contains(v, "__range") {
			return "5m"
		}
		return ".*"
	})
}

// labelValues reads the metric of a label_values(metric, label) query.
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)

// dashboardQueries returns every query of the dashboard, panel by panel
// (rows' panels included), and of its variables, each with where it is.
func dashboardQueries(d dashboard) map[string]string {
	queries := map[string]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, target := range p.Targets {
				queries[fmt.Sprintf("panel %d %q target %d", p.ID, p.Title, i)] = target.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if m := labelValues.FindStringSubmatch(q); m != nil {
			queries["variable "+v.Name] = m[1]
		} else {
			queries["variable "+v.Name] = q
		}
	}
	return queries
}

// unexported lists each problem of the dashboard's queries: one that does
// not parse as PromQL, is empty, or names a metric the service does not
// export.
func unexported(d dashboard, exported map[string]dto.MetricType) []string {
	var problems []string
	for where, expr := range dashboardQueries(d) {
		if strings.TrimSpace(expr) == "" {
			problems = append(problems, where+": no query")
			continue
		}
		names, err := selectedMetrics(promQL(expr))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q: %v", where, expr, err))
			continue
		}
		for _, name := range names {
			if _, ok := exported[name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: %q reads %q, which the service does not export", where, expr, name))
			}
		}
	}
	return problems
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", dashboardFile, err)
	}
	return d
}

// TestDashboardReadsExportedMetrics: every query of every panel and
// variable parses as PromQL and reads only metrics `serve` exports (the
// list exportedMetrics builds from the real constructors), and the
// dashboard covers each part of the service: a panel removed or a metric
// renamed fails here.
func TestDashboardReadsExportedMetrics(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	exported := exportedMetrics(t)
	for _, p := range unexported(d, exported) {
		t.Error(p)
	}
	used := map[string]bool{}
	for _, expr := range dashboardQueries(d) {
		names, _ := selectedMetrics(promQL(expr))
		for _, name := range names {
			used[name] = true
		}
	}
	for _, want := range []string{
		"fleet_manager_build_info",
		"fleet_manager_api_inbound_requests_total", "fleet_manager_api_inbound_request_duration_seconds_bucket",
		"fleet_manager_reconcile_queue_depth", "fleet_manager_reconcile_duration_seconds_bucket", "fleet_manager_reconcile_duration_seconds_count",
		"fleet_manager_registrations", "fleet_manager_hubs", "fleet_manager_dns_record_changes_total",
		"fleet_manager_user_metrics_backend_request_duration_seconds_count", "go_sql_in_use_connections", "go_sql_wait_count_total",
	} {
		if !used[want] {
			t.Errorf("%s has no panel reading %s", dashboardFile, want)
		}
	}
}

// TestDashboardCheckHasTeeth: the check above reports a misspelled metric,
// a histogram's bare name, a query that does not parse and an empty one.
func TestDashboardCheckHasTeeth(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	for _, c := range []struct{ expr, want string }{
		{`sum(rate(fleet_manager_api_inbound_request_total[$__rate_interval]))`, "fleet_manager_api_inbound_request_total"},
		{`fleet_manager_reconcile_duration_seconds{namespace=~"$namespace"}`, "fleet_manager_reconcile_duration_seconds"},
		{`sum by (route (rate(fleet_manager_api_inbound_requests_total[5m]))`, "parse error"},
		{``, "no query"},
	} {
		var d dashboard
		d.Panels = []panel{{ID: 1, Title: "bad", Targets: []struct {
			Expr string `json:"expr"`
		}{{Expr: c.expr}}}}
		problems := unexported(d, exported)
		if len(problems) != 1 || !strings.Contains(problems[0], c.want) {
			t.Errorf("unexported(%q) = %q, want one problem naming %q", c.expr, problems, c.want)
		}
	}
}

// TestDashboardIsWellFormed: panel ids are unique, every panel with
// queries reads the dashboard's data source variable, and the variables
// it uses are declared.
func TestDashboardIsWellFormed(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q, want both", dashboardFile, d.UID, d.Title)
	}
	declared := map[string]bool{}
	for _, v := range d.Templating.List {
		declared[v.Name] = true
	}
	for _, m := range grafanaVariable.FindAllStringSubmatch(string(b), -1) {
		if !strings.HasPrefix(m[1], "__") && !declared[m[1]] {
			t.Errorf("%s uses $%s, which no variable declares", dashboardFile, m[1])
		}
	}
	ids := map[int]bool{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d twice", p.ID)
			}
			ids[p.ID] = true
			if len(p.Targets) > 0 && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
				t.Errorf("panel %d %q: datasource %+v, want ${datasource}", p.ID, p.Title, p.Datasource)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}
