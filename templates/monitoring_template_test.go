package templates_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/rest"
)

const monitoringFile = "monitoring-template.yml"

// serviceMonitor and prometheusRule are the parts of the Prometheus
// Operator's kinds the template uses. As with the CloudNativePG template's
// PodMonitor, the test hub has no CRD of monitoring.coreos.com: the objects
// are decoded strictly into these types (a misspelled field fails), and
// promtool checks the rules themselves (rules_test.go).
type serviceMonitor struct {
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
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Scheme   string `json:"scheme"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// monitoringObjects processes the monitoring template with params and
// decodes its two objects strictly.
func monitoringObjects(t *testing.T, params map[string]string) (serviceMonitor, prometheusRule) {
	t.Helper()
	return monitorAndRule[serviceMonitor](t, monitoringFile, "ServiceMonitor", params)
}

// monitorAndRule processes a monitoring template (file) with params, checks
// that it holds exactly a monitor of monitorKind and a PrometheusRule of
// monitoring.coreos.com/v1, and decodes both strictly.
func monitorAndRule[M any](t *testing.T, file, monitorKind string, params map[string]string) (M, prometheusRule) {
	t.Helper()
	objs := process(t, file, params)
	want := []string{monitorKind, "PrometheusRule"}
	slices.Sort(want)
	if got := kinds(objs); !slices.Equal(got, want) {
		t.Fatalf("%s kinds = %v, want %v", file, got, want)
	}
	var monitor M
	var pr prometheusRule
	for kind, v := range map[string]any{monitorKind: &monitor, "PrometheusRule": &pr} {
		obj := only(t, objs, kind)
		if apiVersion := obj.GetAPIVersion(); apiVersion != "monitoring.coreos.com/v1" {
			t.Errorf("%s %s: apiVersion = %q, want monitoring.coreos.com/v1", file, kind, apiVersion)
		}
		strict(t, obj, v)
	}
	return monitor, pr
}

func strict(t *testing.T, obj *unstructured.Unstructured, v any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, v, true); err != nil {
		t.Fatalf("%s: %v", obj.GetKind(), err)
	}
}

// TestServiceMonitorScrapesTheService: the ServiceMonitor selects the
// Service of the service template, processed with the same SERVICE_NAME,
// on its port named metrics, at the path the metrics server answers.
func TestServiceMonitorScrapesTheService(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "fleet-staging"} {
		params := map[string]string{}
		if name != "" {
			params["SERVICE_NAME"] = name
			params["METRICS_NAMESPACE"] = strings.ReplaceAll(name, "-", "_")
		}
		sm, _ := monitoringObjects(t, params)
		svcParams := map[string]string{"IMAGE_TAG": "abc", "JWKS_URL": "https://sso.example.com/certs",
			"AUTH_ISSUERS": "https://sso.example.com", "AUTH_AUDIENCE": "fleet-manager"}
		maps.Copy(svcParams, params)
		delete(svcParams, "METRICS_NAMESPACE")
		svc := only(t, process(t, serviceFile, svcParams), "Service")

		selector := sm.Spec.Selector.MatchLabels
		if len(selector) == 0 {
			t.Errorf("ServiceMonitor selects every Service of the namespace, want the service template's")
		}
		for k, v := range selector {
			if svc.GetLabels()[k] != v {
				t.Errorf("SERVICE_NAME=%q: ServiceMonitor selector %s=%s, the Service's labels %v", name, k, v, svc.GetLabels())
			}
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		var portNames []string
		for _, p := range ports {
			portNames = append(portNames, p.(map[string]any)["name"].(string))
		}
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor endpoints = %+v, want one", sm.Spec.Endpoints)
		}
		ep := sm.Spec.Endpoints[0]
		if ep.Port != "metrics" || !slices.Contains(portNames, ep.Port) {
			t.Errorf("ServiceMonitor endpoint port = %q, want metrics among the Service's ports %v", ep.Port, portNames)
		}
		if ep.Path != "/metrics" || ep.Scheme != "http" {
			t.Errorf("ServiceMonitor endpoint = %s %s, want http /metrics", ep.Scheme, ep.Path)
		}
		if ep.Interval == "" {
			t.Errorf("ServiceMonitor endpoint has no interval")
		}
		// The path is one the real metrics server answers.
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

// TestMonitoringNamespaceFollowsTheServiceName: the default metric prefix
// is the binary's for the default service name, and a processed template
// names only metrics under the prefix it was given (or the runtime's).
func TestMonitoringNamespaceFollowsTheServiceName(t *testing.T) {
	t.Parallel()
	tpl := load(t, monitoringFile)
	defaults := map[string]string{}
	for _, p := range tpl.Parameters {
		defaults[p.Name] = p.Value
	}
	cfg := rest.DefaultConfig()
	if defaults["SERVICE_NAME"] != cfg.ServiceName {
		t.Errorf("SERVICE_NAME defaults to %q, the binary's --service-name to %q", defaults["SERVICE_NAME"], cfg.ServiceName)
	}
	if got, want := defaults["METRICS_NAMESPACE"], cfg.MetricsNamespace(); got != want {
		t.Errorf("METRICS_NAMESPACE defaults to %q, want %q (the binary's prefix for --service-name %s)", got, want, cfg.ServiceName)
	}
	_, pr := monitoringObjects(t, map[string]string{"SERVICE_NAME": "fleet-b", "METRICS_NAMESPACE": "fleet_b"})
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			for _, name := range metricNames(t, r.Alert, r.Expr) {
				if !strings.HasPrefix(name, "fleet_b_") {
					t.Errorf("METRICS_NAMESPACE=fleet_b: alert %s reads %s", r.Alert, name)
				}
			}
		}
	}
}

// alertName is how an alert's name reads: the service's, then what is wrong.
var alertName = regexp.MustCompile(`^FleetManager[A-Z][A-Za-z]+$`)

// TestAlertsReadExportedMetrics: every rule parses, reads only metrics the
// service exports, is an alert with a known severity and a summary and a
// description, and the group names are unique.
func TestAlertsReadExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	_, pr := monitoringObjects(t, nil)
	if len(pr.Spec.Groups) == 0 {
		t.Fatal("PrometheusRule has no group")
	}
	checkAlertRules(t, pr, alertName, "FleetManager", exported, "the service")
}

// checkAlertRules checks a PrometheusRule's groups: unique group and alert
// names, every rule an alert named by name (<prefix><What>), reading only
// metrics in exported (what exports them: who), with a known severity, a
// summary and a description.
func checkAlertRules(t *testing.T, pr prometheusRule, name *regexp.Regexp, prefix string, exported map[string]dto.MetricType, who string) {
	t.Helper()
	groups, alerts := map[string]bool{}, map[string]bool{}
	for _, g := range pr.Spec.Groups {
		if groups[g.Name] {
			t.Errorf("rule group %s twice", g.Name)
		}
		groups[g.Name] = true
		for _, r := range g.Rules {
			if !name.MatchString(r.Alert) || r.Record != "" {
				t.Errorf("group %s: rule %q/%q, want an alert named %s<What>", g.Name, r.Alert, r.Record, prefix)
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s twice", r.Alert)
			}
			alerts[r.Alert] = true
			for _, metric := range metricNames(t, r.Alert, r.Expr) {
				if _, ok := exported[metric]; !ok {
					t.Errorf("alert %s reads %s, which %s does not export", r.Alert, metric, who)
				}
			}
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: annotations %v, want a summary and a description", r.Alert, r.Annotations)
			}
		}
	}
}

// TestAlertsAreDocumented: docs/operations.md's "What to alert on" table
// names every alert of the PrometheusRule, and names none it lacks, so an
// operator reading the table finds the alert that fired.
func TestAlertsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## What to alert on\n")
	if !ok {
		t.Fatal("docs/operations.md has no section What to alert on")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(FleetManager[A-Za-z]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	_, pr := monitoringObjects(t, nil)
	inRule := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			inRule[r.Alert] = true
			if !documented[r.Alert] {
				t.Errorf("alert %s is not in docs/operations.md's What to alert on", r.Alert)
			}
		}
	}
	for name := range documented {
		if !inRule[name] {
			t.Errorf("docs/operations.md names alert %s, which the PrometheusRule lacks", name)
		}
	}
}
