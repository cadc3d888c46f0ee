package templates_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
)

const (
	agentMonitoringFile = "agent-monitoring-template.yml"
	// agentRulesTestFile holds the promtool unit tests of the agent's
	// alerts; it names its rule file agent-rules.yml, which the test
	// writes beside it.
	agentRulesTestFile = "testdata/agent-rules-test.yml"
)

// agentPodMonitor is the part of the Prometheus Operator's PodMonitor the
// template uses, decoded strictly as the ServiceMonitor is.
type agentPodMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Scheme   string `json:"scheme"`
			Interval string `json:"interval"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// agentMonitoringObjects processes the agent's monitoring template with
// params and decodes its two objects strictly.
func agentMonitoringObjects(t *testing.T, params map[string]string) (agentPodMonitor, prometheusRule) {
	t.Helper()
	return monitorAndRule[agentPodMonitor](t, agentMonitoringFile, "PodMonitor", params)
}

// agentExportedMetrics returns the name of every series `fleetshard-sync
// run` exports (histograms' series included): the collectors its run
// registers, each made by its own constructor.
func agentExportedMetrics(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	r := &recorder{reg: prometheus.NewRegistry(), types: map[string]dto.MetricType{}}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := agent.NewMetrics(r); err != nil {
		t.Fatalf("agent.NewMetrics: %v", err)
	}
	return r.names(t)
}

// TestAgentExportedMetricsAreRead: the list the agent's rules are checked
// against holds the agent's counters, gauges and histogram series, and not
// the service's.
func TestAgentExportedMetricsAreRead(t *testing.T) {
	t.Parallel()
	got := agentExportedMetrics(t)
	for _, want := range []string{"fleetshard_sync_leader", "fleetshard_sync_heartbeats_total", "fleetshard_sync_desired_polls_total",
		"fleetshard_sync_desired_revision", "fleetshard_sync_desired_applied_revision", "fleetshard_sync_inventory_batches_total",
		"fleetshard_sync_desired_apply_duration_seconds_bucket", "go_goroutines"} {
		if _, ok := got[want]; !ok {
			t.Errorf("agentExportedMetrics() lacks %s", want)
		}
	}
	for _, absent := range []string{"fleet_manager_build_info", "fleetshard_sync_desired_apply_duration_seconds"} {
		if _, ok := got[absent]; ok {
			t.Errorf("agentExportedMetrics() has %s, which the agent does not export", absent)
		}
	}
}

// TestPodMonitorScrapesTheAgent: the PodMonitor selects the pods of the
// agent template's Deployment, processed with the same NAME, on their
// container port named metrics, at the path the metrics server answers.
func TestPodMonitorScrapesTheAgent(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "fleetshard-sync-b"} {
		params := map[string]string{}
		if name != "" {
			params["NAME"] = name
		}
		pm, _ := agentMonitoringObjects(t, params)
		agentParams := map[string]string{"NAMESPACE": "fleetshard-sync", "IMAGE_TAG": "abc",
			"FLEET_MANAGER_URL": "https://fleet.example.com/api/fleet_manager/v1", "HUB_ID": "hub-1"}
		if name != "" {
			agentParams["NAME"] = name
		}
		d := only(t, process(t, agentFile, agentParams), "Deployment")
		podLabels := field[map[string]any](t, d, "spec", "template", "metadata", "labels")
		selector := pm.Spec.Selector.MatchLabels
		if len(selector) == 0 {
			t.Errorf("PodMonitor selects every pod of the namespace, want the agent's")
		}
		for k, v := range selector {
			if podLabels[k] != v {
				t.Errorf("NAME=%q: PodMonitor selector %s=%s, the agent pod's labels %v", name, k, v, podLabels)
			}
		}
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		var ports []string
		for _, c := range containers {
			ps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range ps {
				ports = append(ports, p.(map[string]any)["name"].(string))
			}
		}
		if len(pm.Spec.PodMetricsEndpoints) != 1 {
			t.Fatalf("PodMonitor endpoints = %+v, want one", pm.Spec.PodMetricsEndpoints)
		}
		ep := pm.Spec.PodMetricsEndpoints[0]
		if ep.Port != "metrics" || !slices.Contains(ports, ep.Port) {
			t.Errorf("PodMonitor endpoint port = %q, want metrics among the agent's container ports %v", ep.Port, ports)
		}
		if ep.Path != "/metrics" || ep.Scheme != "http" || ep.Interval == "" {
			t.Errorf("PodMonitor endpoint = %s %s every %q, want http /metrics with an interval", ep.Scheme, ep.Path, ep.Interval)
		}
		srv := httptest.NewServer(httpserve.NewMetricsHandler(prometheus.NewRegistry(), false))
		resp, err := srv.Client().Get(srv.URL + ep.Path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("metrics server GET %s = %v, %v; want 200", ep.Path, resp, err)
		} else {
			_ = resp.Body.Close()
		}
		srv.Close()
	}
}

// agentAlertName is how an agent's alert reads.
var agentAlertName = regexp.MustCompile(`^FleetshardSync[A-Z][A-Za-z]+$`)

// TestAgentAlertsReadExportedMetrics: every rule parses, reads only metrics
// the agent exports, is an alert named FleetshardSync<What> with a known
// severity, a summary and a description; group and alert names are unique.
func TestAgentAlertsReadExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := agentExportedMetrics(t)
	_, pr := agentMonitoringObjects(t, nil)
	if len(pr.Spec.Groups) == 0 {
		t.Fatal("PrometheusRule has no group")
	}
	checkAlertRules(t, pr, agentAlertName, "FleetshardSync", exported, "the agent")
}

// writeAgentRules writes the agent's PrometheusRule groups, from the
// template processed with its defaults and each rule passed to edit, as
// agent-rules.yml in dir, with the promtool tests beside it.
func writeAgentRules(t *testing.T, dir string, edit func(*rule)) {
	t.Helper()
	_, pr := agentMonitoringObjects(t, nil)
	for _, g := range pr.Spec.Groups {
		for i := range g.Rules {
			edit(&g.Rules[i])
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatalf("yaml.Marshal(groups): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent-rules.yml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(agentRulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent-rules-test.yml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAgentAlertRulesPassPromtool: `promtool check rules` accepts the
// agent's rule file and `promtool test rules` runs
// testdata/agent-rules-test.yml against it.
func TestAgentAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeAgentRules(t, dir, func(*rule) {})
	if out, err := promtool(t, dir, "check", "rules", "agent-rules.yml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err := promtool(t, dir, "test", "rules", "agent-rules-test.yml")
	if err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules %s: %v\n%s", agentRulesTestFile, err, out)
	}
}

// TestAgentPromtoolTestsHaveTeeth: the same tests fail against a rule file
// whose backlog alert lets a larger backlog pass, so a passing run means the
// expectations were checked.
func TestAgentPromtoolTestsHaveTeeth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	moved := false
	writeAgentRules(t, dir, func(r *rule) {
		if r.Alert == "FleetshardSyncRevisionBehind" {
			r.Expr, moved = strings.Replace(r.Expr, ") > 0", ") > 5", 1), strings.HasSuffix(r.Expr, ") > 0")
		}
	})
	if !moved {
		t.Fatal("FleetshardSyncRevisionBehind has no threshold > 0 to move")
	}
	out, err := promtool(t, dir, "test", "rules", "agent-rules-test.yml")
	if err == nil || !strings.Contains(out, "FleetshardSyncRevisionBehind") {
		t.Errorf("promtool test rules with the backlog threshold at 5 = %v, want a failure naming FleetshardSyncRevisionBehind:\n%s", err, out)
	}
}

// TestEveryAgentAlertIsTestedFiringAndSilent: each agent alert has a
// promtool case where it fires and one where it stays silent.
func TestEveryAgentAlertIsTestedFiringAndSilent(t *testing.T) {
	t.Parallel()
	_, pr := agentMonitoringObjects(t, nil)
	checkEveryAlertTested(t, agentRulesTestFile, "agent-rules.yml", pr)
}

// TestAgentAlertsAreDocumented: docs/agent.md's "Alerts" section names every
// alert of the agent's PrometheusRule and none it lacks, and
// docs/operations.md's "What to alert on" points to each.
func TestAgentAlertsAreDocumented(t *testing.T) {
	t.Parallel()
	documented := func(file, heading string) map[string]bool {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, section, ok := strings.Cut(string(doc), "\n## "+heading+"\n")
		if !ok {
			t.Fatalf("%s has no section %s", file, heading)
		}
		section, _, _ = strings.Cut(section, "\n## ")
		names := map[string]bool{}
		for _, m := range regexp.MustCompile("`(FleetshardSync[A-Za-z]+)`").FindAllStringSubmatch(section, -1) {
			names[m[1]] = true
		}
		return names
	}
	inAgent, inOperations := documented("../docs/agent.md", "Alerts"), documented("../docs/operations.md", "What to alert on")
	_, pr := agentMonitoringObjects(t, nil)
	inRule := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			inRule[r.Alert] = true
			if !inAgent[r.Alert] {
				t.Errorf("alert %s is not in docs/agent.md's Alerts", r.Alert)
			}
			if !inOperations[r.Alert] {
				t.Errorf("alert %s is not in docs/operations.md's What to alert on", r.Alert)
			}
		}
	}
	for name := range inAgent {
		if !inRule[name] {
			t.Errorf("docs/agent.md names alert %s, which the PrometheusRule lacks", name)
		}
	}
	for name := range inOperations {
		if !inRule[name] {
			t.Errorf("docs/operations.md names alert %s, which the PrometheusRule lacks", name)
		}
	}
}
