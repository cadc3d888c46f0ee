package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/promtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The series the exporter serves for every cluster: cpu and
// cluster:cpu_usage_cores:sum are on the allow-list, secret_metric is not;
// the labels cluster and node are, secret is not.
const (
	metricCPU       = "cpu"
	metricCPUUsage  = "cluster:cpu_usage_cores:sum"
	metricSecret    = "secret_metric"
	secretLabelMark = "hunter2"
	// unlabelledCluster and unlabelledNode are the labels of a cpu series
	// without a clusterID.
	unlabelledCluster = "no-cluster-label"
	unlabelledNode    = "node-unlabelled"
	// userMetricsAllowList is the allow-list file the fleet manager serves
	// with.
	userMetricsAllowList = `metrics: [cpu, "cluster:cpu_usage_cores:sum"]
labels: [cluster, node]
inventory: [cluster_info, cluster_capacity, cluster_allocatable, cluster_available, cluster_phase,
  cluster_policy_compliant, registrations, pool_clusters, pool_capacity_units, pool_reserved_units]
`
)

// metricsCluster is one cluster whose series the exporter serves.
type metricsCluster struct {
	regID     string // its registration ("" for the orphan)
	name      string // its ManagedCluster's name: the series' cluster label
	clusterID string // its id.openshift.io claim: the series' clusterID label
	node      string
	cpu       float64
}

// metricsOrg is one organisation with its clusters and a user token.
type metricsOrg struct {
	id       string
	token    string
	clusters []metricsCluster
}

// ids returns the clusterID values of the organisation's clusters.
func (o *metricsOrg) ids() []string {
	var out []string
	for _, c := range o.clusters {
		out = append(out, c.clusterID)
	}
	slices.Sort(out)
	return out
}

// metricsFleet is the fleet-manager binary in front of a real Prometheus
// (the backend) that scrapes an exporter serving series for the clusters of
// three organisations, and for one cluster no inventory knows.
type metricsFleet struct {
	t        *testing.T
	g        gomega.Gomega
	s        *stack
	backend  *promtest.Prometheus
	exporter *promtest.Exporter
	orgs     []*metricsOrg // a, b, c
	orphan   metricsCluster
	admin    string
}

// newMetricsFleet starts the backend, the fleet manager (with extra
// flags), a hub with its agent, registers 2, 2 and 1 clusters for three
// organisations, waits until the inventory holds each with its
// id.openshift.io claim, and has the exporter serve their series.
func newMetricsFleet(t *testing.T, name string, extra ...string) *metricsFleet {
	t.Helper()
	exporter := promtest.NewExporter(t)
	backend := promtest.Start(t, promtest.Options{ScrapeConfigs: exporter.ScrapeConfig("clusters")})
	allowList := filepath.Join(t.TempDir(), "allow-list.yaml")
	if err := os.WriteFile(allowList, []byte(userMetricsAllowList), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := append([]string{
		"--user-metrics-backend-url=" + backend.URL(),
		"--user-metrics-allow-list-file=" + allowList,
		"--user-metrics-cluster-label=clusterID",
		"--user-metrics-cluster-label-source=cluster-id",
		"--user-metrics-max-range=1h",
		"--user-metrics-min-step=1s",
		"--user-metrics-backend-timeout=10s",
		// The tests send many requests per organisation; the rate limit
		// has a test of its own.
		"--user-metrics-rate=1000", "--user-metrics-burst=1000",
	}, extra...)
	hydra := hydratest.Start(t)
	fm := startFleetManager(t, hydra, flags...)
	// Each cluster on a control plane of its own, with an id.openshift.io
	// claim of its own: the series name their cluster by it.
	s := newStackOnWith(t, name, hydra, testHub(t), fm, playImportControllerOwnClusters)
	m := &metricsFleet{t: t, g: s.g, s: s, backend: backend, exporter: exporter, admin: s.admin}
	for i, letter := range []string{"a", "b", "c"} {
		org := &metricsOrg{id: "org-" + name + "-" + letter}
		org.token = fm.token(org.id, "user-"+letter)
		n := 2
		if letter == "c" {
			n = 1
		}
		for j := range n {
			c := m.registerAs(org.token, fmt.Sprintf("%s-%s%d", name, letter, j+1))
			c.node = fmt.Sprintf("node-%s-%d", letter, j+1)
			c.cpu = float64((i*10+j+1)*100) + 0.5
			org.clusters = append(org.clusters, c)
		}
		m.orgs = append(m.orgs, org)
	}
	for _, org := range m.orgs {
		m.waitForClaims(org)
	}
	m.orphan = metricsCluster{name: name + "-orphan", clusterID: "cid-orphan-" + name, node: "node-orphan", cpu: 9999}
	exporter.Set(m.exporterBody())
	backend.WaitForSeries(t, metricCPU, 7)
	backend.WaitForSeries(t, metricSecret, 6)
	// Samples a few seconds old, so that offsets and subqueries find some.
	backend.WaitForSeries(t, metricCPU+" offset 3s", 7)
	return m
}

// registerAs registers a cluster with token and returns its registration.
func (m *metricsFleet) registerAs(token, name string) metricsCluster {
	m.t.Helper()
	resp, err := m.s.fm.Public.CreateClusterWithResponse(context.Background(), nil, public.ClusterCreate{Name: name, Zone: ptr("eu"),
		Product: public.ROSA, Labels: &public.Labels{"env": "e2e"},
		Credentials: &public.ImportCredentials{ApiUrl: ptr("https://api." + name + ".example.com:6443"), Token: ptr("sha256~" + name)}}, bearer(token))
	if err != nil || resp.JSON202 == nil {
		m.t.Fatalf("CreateCluster(%s) = %v %s, %v", name, resp.StatusCode(), resp.Body, err)
	}
	return metricsCluster{regID: resp.JSON202.Id}
}

// waitForClaims waits until the organisation's inventory lists each of its
// registrations' clusters with an id.openshift.io claim, and records them.
func (m *metricsFleet) waitForClaims(org *metricsOrg) {
	m.t.Helper()
	var last []public.ManagedCluster
	m.g.Eventually(func() bool {
		resp, err := m.s.fm.Public.ListManagedClustersWithResponse(context.Background(),
			&public.ListManagedClustersParams{Search: ptr("hub_id = '" + m.s.hubID + "'"), Size: ptr(100)}, bearer(org.token))
		if err != nil || resp.JSON200 == nil {
			return false
		}
		last = resp.JSON200.Items
		byReg := map[string]public.ManagedCluster{}
		for _, mc := range last {
			if mc.RegistrationId != nil && mc.ClusterId != nil && *mc.ClusterId != "" {
				byReg[*mc.RegistrationId] = mc
			}
		}
		for _, c := range org.clusters {
			if _, ok := byReg[c.regID]; !ok {
				return false
			}
		}
		for i, c := range org.clusters {
			mc := byReg[c.regID]
			org.clusters[i].name, org.clusters[i].clusterID = mc.Name, *mc.ClusterId
		}
		return len(last) == len(org.clusters)
	}).WithTimeout(90*time.Second).WithPolling(300*time.Millisecond).Should(gomega.BeTrue(),
		func() string { return fmt.Sprintf("the inventory of %s with claims; last: %+v", org.id, last) })
}

// exporterBody renders every cluster's series, grouped by family as the text
// format wants.
func (m *metricsFleet) exporterBody() string {
	type series struct {
		c   metricsCluster
		org string
	}
	var all []series
	for _, org := range m.orgs {
		for _, c := range org.clusters {
			all = append(all, series{c, org.id})
		}
	}
	all = append(all, series{m.orphan, "orphan"})
	var b strings.Builder
	b.WriteString("# TYPE cpu gauge\n")
	for _, s := range all {
		fmt.Fprintf(&b, "cpu{clusterID=%q,cluster=%q,node=%q,secret=%q} %g\n", s.c.clusterID, s.c.name, s.c.node, secretLabelMark+"-"+s.org, s.c.cpu)
	}
	// A series without the cluster label is no organisation's.
	fmt.Fprintf(&b, "cpu{cluster=%q,node=%q,secret=%q} 7\n", unlabelledCluster, unlabelledNode, secretLabelMark+"-global")
	b.WriteString("# TYPE cluster:cpu_usage_cores:sum gauge\n")
	for _, s := range all {
		fmt.Fprintf(&b, "cluster:cpu_usage_cores:sum{clusterID=%q,cluster=%q} %g\n", s.c.clusterID, s.c.name, s.c.cpu/100)
	}
	b.WriteString("# TYPE secret_metric gauge\n")
	for _, s := range all {
		fmt.Fprintf(&b, "secret_metric{clusterID=%q,cluster=%q} 1\n", s.c.clusterID, s.c.name)
	}
	return b.String()
}

// others returns what must never appear in an answer to org: the other
// organisations' and the orphan's cluster ids, names and node labels, and
// the off-list label's values and metric.
func (m *metricsFleet) others(org *metricsOrg) []string {
	out := []string{secretLabelMark, metricSecret, m.orphan.clusterID, m.orphan.name, m.orphan.node, unlabelledCluster, unlabelledNode}
	for _, o := range m.orgs {
		if o == org {
			continue
		}
		out = append(out, o.id)
		for _, c := range o.clusters {
			out = append(out, c.clusterID, c.name, c.node)
		}
	}
	return out
}

// aID returns the first cluster id of the first organisation.
func aID(m *metricsFleet) string { return m.orgs[0].clusters[0].clusterID }

// allIDs returns every organisation's cluster ids.
func (m *metricsFleet) allIDs() []string {
	var out []string
	for _, o := range m.orgs {
		out = append(out, o.ids()...)
	}
	slices.Sort(out)
	return out
}

// call sends one request to {base}{path} with token: params in the query
// string for GET, as a form body for POST.
func (m *metricsFleet) call(t *testing.T, token, method, path string, params url.Values) (int, http.Header, []byte) {
	t.Helper()
	target := m.s.fm.Base + path
	var body io.Reader
	if method == http.MethodGet && len(params) > 0 {
		target += "?" + params.Encode()
	} else if method == http.MethodPost {
		body = strings.NewReader(params.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, raw
}

// promAnswer is the Prometheus HTTP API's answer shape.
type promAnswer struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
}

// seriesOf decodes a successful vector or matrix answer into its series,
// with their values (a matrix series' last).
func seriesOf(t *testing.T, what string, raw []byte) []*model.Sample {
	t.Helper()
	var a promAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: not a Prometheus API answer: %v\n%s", what, err, raw)
	}
	if a.Status != "success" {
		t.Fatalf("%s: status %q: %s", what, a.Status, raw)
	}
	switch a.Data.ResultType {
	case "vector":
		var v model.Vector
		if err := json.Unmarshal(a.Data.Result, &v); err != nil {
			t.Fatalf("%s: vector: %v\n%s", what, err, raw)
		}
		return v
	case "matrix":
		var mx model.Matrix
		if err := json.Unmarshal(a.Data.Result, &mx); err != nil {
			t.Fatalf("%s: matrix: %v\n%s", what, err, raw)
		}
		var out []*model.Sample
		for _, ss := range mx {
			if len(ss.Values) == 0 {
				t.Fatalf("%s: a series without values: %s", what, raw)
			}
			last := ss.Values[len(ss.Values)-1]
			out = append(out, &model.Sample{Metric: ss.Metric, Value: last.Value, Timestamp: last.Timestamp})
		}
		return out
	default:
		return nil
	}
}

// clusterIDs returns the sorted clusterID values of samples.
func clusterIDs(samples []*model.Sample) []string {
	out := []string{}
	for _, s := range samples {
		out = append(out, string(s.Metric["clusterID"]))
	}
	slices.Sort(out)
	return out
}

// ocmCode returns the code of an OCM error body.
func ocmCode(raw []byte) string {
	var e struct {
		Kind string `json:"kind"`
		Code string `json:"code"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Kind != "Error" {
		return ""
	}
	return e.Code
}

// expectLabelsAllowed fails when a series carries a label off the
// allow-list (besides the metric name and the cluster label).
func expectLabelsAllowed(g gomega.Gomega, what string, samples []*model.Sample) {
	allowed := map[model.LabelName]bool{model.MetricNameLabel: true, "clusterID": true, "cluster": true, "node": true}
	for _, s := range samples {
		for name := range s.Metric {
			g.Expect(allowed).To(gomega.HaveKey(name), "%s: series %s carries a label off the allow-list", what, s.Metric)
		}
	}
}

// expectNone fails when raw holds any of words.
func expectNone(g gomega.Gomega, what string, raw []byte, words []string) {
	for _, w := range words {
		g.Expect(string(raw)).NotTo(gomega.ContainSubstring(w), "%s: the answer holds %q, which this caller may not read (another organisation's, or off the allow-list):\n%s", what, w, raw)
	}
}

// parseText parses a Prometheus text exposition.
func parseText(t *testing.T, what string, raw []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: the text format does not parse: %v\n%s", what, err, raw)
	}
	return families
}

// familyLabelValues returns the sorted values of label over a family's
// series (nil for a missing family).
func familyLabelValues(families map[string]*dto.MetricFamily, family, label string) []string {
	mf, ok := families[family]
	if !ok {
		return nil
	}
	out := []string{}
	for _, m := range mf.GetMetric() {
		v := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				v = l.GetValue()
			}
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// familyValue returns the value of the family's series whose label has
// value, or -1 when there is none.
func familyValue(families map[string]*dto.MetricFamily, family, label, value string) float64 {
	for _, m := range families[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				switch {
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				case m.Untyped != nil:
					return m.GetUntyped().GetValue()
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// expectTextOfClusters checks a text exposition: it parses, the allowed
// backend metrics hold exactly the clusters ids (with their values), the
// fleet manager's inventory series hold exactly ids, and nothing off the
// allow-list or of others is there.
func (m *metricsFleet) expectTextOfClusters(t *testing.T, what string, header http.Header, raw []byte, clusters []metricsCluster, others []string) {
	t.Helper()
	g := gomega.NewWithT(t)
	g.Expect(header.Get("Content-Type")).To(gomega.HavePrefix("text/plain"), "%s: Content-Type", what)
	families := parseText(t, what, raw)
	var ids []string
	for _, c := range clusters {
		ids = append(ids, c.clusterID)
	}
	slices.Sort(ids)
	g.Expect(familyLabelValues(families, metricCPU, "clusterID")).To(gomega.Equal(ids), "%s: clusterID of %s:\n%s", what, metricCPU, raw)
	g.Expect(familyLabelValues(families, metricCPUUsage, "clusterID")).To(gomega.Equal(ids), "%s: clusterID of %s:\n%s", what, metricCPUUsage, raw)
	for _, c := range clusters {
		g.Expect(familyValue(families, metricCPU, "clusterID", c.clusterID)).To(gomega.Equal(c.cpu), "%s: %s of %s", what, metricCPU, c.clusterID)
	}
	g.Expect(families).NotTo(gomega.HaveKey(metricSecret), "%s: a metric off the allow-list", what)
	for name, mf := range families {
		for _, mm := range mf.GetMetric() {
			for _, l := range mm.GetLabel() {
				g.Expect(l.GetName()).NotTo(gomega.Equal("secret"), "%s: family %s carries the label off the allow-list", what, name)
			}
		}
	}
	g.Expect(familyLabelValues(families, "fleet_manager_cluster_info", "clusterID")).To(gomega.Equal(ids),
		"%s: the fleet manager's own series of the clusters:\n%s", what, raw)
	g.Expect(familyLabelValues(families, "fleet_manager_cluster_capacity", "clusterID")).To(gomega.ContainElements(ids),
		"%s: the clusters' capacity from the inventory:\n%s", what, raw)
	expectNone(g, what, raw, others)
}

// userMetricsQueryEndpoints are the query paths, each with its alias.
var userMetricsQueryEndpoints = []string{"/metrics/query", "/metrics/api/v1/query"}

var userMetricsRangeEndpoints = []string{"/metrics/query_range", "/metrics/api/v1/query_range"}

// unix renders a time as the API's seconds, to the millisecond: whole
// seconds would ask for a moment before the first samples of a backend
// that started scraping within the second.
func unix(at time.Time) string { return strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64) }

// TestUserMetrics: through the fleet-manager binary in front of a real
// Prometheus, each organisation reads exactly its own clusters' series, only
// the allowed metrics and labels, through every endpoint; hostile queries
// never return another organisation's series; an admin reads all; promtool
// and a second real Prometheus read them with a bearer token.
func TestUserMetrics(t *testing.T) {
	m := newMetricsFleet(t, "um")
	a, b, c := m.orgs[0], m.orgs[1], m.orgs[2]

	t.Run("query", func(t *testing.T) {
		for _, org := range m.orgs {
			for _, path := range userMetricsQueryEndpoints {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					for _, expr := range []string{metricCPU, metricCPUUsage} {
						what := fmt.Sprintf("%s %s %s as %s", method, path, expr, org.id)
						t.Run(what, func(t *testing.T) {
							g := gomega.NewWithT(t)
							status, _, raw := m.call(t, org.token, method, path, url.Values{"query": {expr}, "time": {unix(time.Now())}})
							g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
							samples := seriesOf(t, what, raw)
							g.Expect(clusterIDs(samples)).To(gomega.Equal(org.ids()), "%s:\n%s", what, raw)
							expectLabelsAllowed(g, what, samples)
							expectNone(g, what, raw, m.others(org))
							if expr != metricCPU {
								return
							}
							for _, s := range samples {
								for _, cl := range org.clusters {
									if string(s.Metric["clusterID"]) == cl.clusterID {
										g.Expect(float64(s.Value)).To(gomega.Equal(cl.cpu), "%s: value of %s", what, cl.clusterID)
										g.Expect(string(s.Metric["node"])).To(gomega.Equal(cl.node), "%s: the allowed label node", what)
										g.Expect(string(s.Metric["cluster"])).To(gomega.Equal(cl.name), "%s: the allowed label cluster", what)
									}
								}
							}
						})
					}
				}
			}
		}
	})

	t.Run("query_range", func(t *testing.T) {
		for _, org := range m.orgs {
			for _, path := range userMetricsRangeEndpoints {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					what := fmt.Sprintf("%s %s %s as %s", method, path, metricCPU, org.id)
					t.Run(what, func(t *testing.T) {
						g := gomega.NewWithT(t)
						now := time.Now()
						status, _, raw := m.call(t, org.token, method, path, url.Values{"query": {metricCPU},
							"start": {unix(now.Add(-30 * time.Second))}, "end": {unix(now)}, "step": {"5"}})
						g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
						var ans promAnswer
						g.Expect(json.Unmarshal(raw, &ans)).To(gomega.Succeed())
						g.Expect(ans.Data.ResultType).To(gomega.Equal("matrix"), "%s: %s", what, raw)
						samples := seriesOf(t, what, raw)
						g.Expect(clusterIDs(samples)).To(gomega.Equal(org.ids()), "%s:\n%s", what, raw)
						expectLabelsAllowed(g, what, samples)
						expectNone(g, what, raw, m.others(org))
					})
				}
			}
		}
	})

	t.Run("aggregations cover the own series only", func(t *testing.T) {
		for _, org := range m.orgs {
			var sum float64
			for _, cl := range org.clusters {
				sum += cl.cpu
			}
			for _, q := range []struct {
				expr string
				want float64
			}{{"count(cpu)", float64(len(org.clusters))}, {"sum(cpu)", sum}, {`count({__name__=~".+"})`, float64(2 * len(org.clusters))}} {
				what := fmt.Sprintf("%s as %s", q.expr, org.id)
				t.Run(what, func(t *testing.T) {
					g := gomega.NewWithT(t)
					status, _, raw := m.call(t, org.token, http.MethodGet, "/metrics/query", url.Values{"query": {q.expr}})
					g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
					samples := seriesOf(t, what, raw)
					g.Expect(samples).To(gomega.HaveLen(1), "%s: %s", what, raw)
					g.Expect(float64(samples[0].Value)).To(gomega.Equal(q.want), "%s: %s", what, raw)
				})
			}
		}
	})

	t.Run("text", func(t *testing.T) {
		for _, org := range m.orgs {
			t.Run("GET /metrics as "+org.id, func(t *testing.T) {
				what := "GET /metrics as " + org.id
				status, header, raw := m.call(t, org.token, http.MethodGet, "/metrics", nil)
				gomega.NewWithT(t).Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
				m.expectTextOfClusters(t, what, header, raw, org.clusters, m.others(org))
			})
			for _, cl := range org.clusters {
				what := fmt.Sprintf("GET /clusters/%s/metrics as %s", cl.regID, org.id)
				t.Run(what, func(t *testing.T) {
					status, header, raw := m.call(t, org.token, http.MethodGet, "/clusters/"+cl.regID+"/metrics", nil)
					gomega.NewWithT(t).Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
					others := m.others(org)
					for _, sibling := range org.clusters {
						if sibling.regID != cl.regID {
							others = append(others, sibling.clusterID)
						}
					}
					m.expectTextOfClusters(t, what, header, raw, []metricsCluster{cl}, others)
				})
			}
		}
		// Another organisation's registration is not found, and its series
		// are not there.
		for _, cl := range b.clusters {
			what := fmt.Sprintf("GET /clusters/%s/metrics (of %s) as %s", cl.regID, b.id, a.id)
			t.Run(what, func(t *testing.T) {
				g := gomega.NewWithT(t)
				status, _, raw := m.call(t, a.token, http.MethodGet, "/clusters/"+cl.regID+"/metrics", nil)
				g.Expect(status).To(gomega.Equal(http.StatusNotFound), "%s: %s", what, raw)
				expectNone(g, what, raw, m.others(a))
			})
		}
	})

	t.Run("hostile", func(t *testing.T) {
		bID, cID, aID := b.clusters[0].clusterID, c.clusters[0].clusterID, a.clusters[0].clusterID
		for _, q := range []struct {
			expr string
			// refused: the answer must be 400 FLEET-MGMT-29; else it may
			// be, or a success without any other organisation's data.
			refused bool
		}{
			{expr: `{__name__=~".+"}`},
			{expr: `{__name__=~".*cpu.*"}`},
			{expr: `{__name__=~"secret.*|cpu"}`},
			{expr: `up or on() {clusterID="` + bID + `"}`},
			{expr: `cpu or on() cpu{clusterID="` + cID + `"}`},
			{expr: `cpu unless on() cpu{clusterID="` + aID + `"}`},
			{expr: `label_replace(cpu, "x", "$1", "clusterID", "(.*)")`},
			{expr: `label_replace(cpu{clusterID="` + bID + `"}, "clusterID", "` + aID + `", "", "")`},
			{expr: `max_over_time(cpu[5m:1s])`},
			{expr: `max_over_time(cpu{clusterID="` + bID + `"}[5m:1s])`},
			{expr: `absent(cpu{clusterID="` + bID + `"})`},
			{expr: `count_values("clusterID", cpu)`},
			{expr: `cpu offset 1m`},
			{expr: `cpu offset 2s`},
			{expr: `cpu{clusterID="` + bID + `"} offset 2s`},
			{expr: `{clusterID="` + bID + `"}`},
			{expr: `{__name__=~".+", clusterID=~"cid-.*"}`},
			{expr: `cpu{clusterID=""}`},
			{expr: `cpu unless cpu{clusterID=~".+"}`},
			{expr: `cpu and on() cpu{clusterID="` + bID + `"}`},
			{expr: `vector(1) or on() cpu{clusterID="` + bID + `"}`},
			{expr: `cpu * on(clusterID) group_left(node) cpu{clusterID="` + bID + `"}`},
			{expr: `cpu * on(clusterID) group_left(secret) cpu`, refused: true},
			{expr: `label_join(cpu, "node", ",", "clusterID", "secret")`, refused: true},
			{expr: `label_replace(cpu, "node", "$1", "secret", "(.*)")`, refused: true},
			{expr: `label_replace(cpu, "node", "$1", "instance", "(.*)")`, refused: true},
			{expr: `count_values("node", cpu)`},
			{expr: `topk(100, cpu)`},
			{expr: `timestamp(cpu{clusterID="` + bID + `"})`},
			{expr: `cpu{`, refused: true},
			{expr: `cpu @ end()`},
			{expr: `cpu{clusterID=~".+"}`},
			{expr: `cpu{clusterID!="` + aID + `"}`},
			{expr: `sum by (clusterID) (cpu{clusterID=~"` + bID + `|` + cID + `"})`},
			{expr: `sum by (secret) (cpu)`, refused: true},
			{expr: `count by (secret) (cpu)`, refused: true},
			{expr: metricSecret, refused: true},
			{expr: `{__name__="secret_metric"}`, refused: true},
			{expr: `max_over_time(cpu[2h])`, refused: true},
			{expr: `cpu offset 3h`, refused: true},
			{expr: `max_over_time(cpu[2h:1m])`, refused: true},
			{expr: `max_over_time(max_over_time(cpu[40m:1m])[40m:1m])`, refused: true},
			{expr: `max_over_time((cpu offset 40m)[40m:1m])`, refused: true},
		} {
			for _, path := range []string{"/metrics/query", "/metrics/api/v1/query_range"} {
				what := fmt.Sprintf("%s as %s through %s", q.expr, a.id, path)
				t.Run(what, func(t *testing.T) {
					g := gomega.NewWithT(t)
					params := url.Values{"query": {q.expr}}
					method := http.MethodGet
					if strings.HasSuffix(path, "query_range") {
						now := time.Now()
						params.Set("start", unix(now.Add(-time.Minute)))
						params.Set("end", unix(now))
						params.Set("step", "10")
						method = http.MethodPost
					}
					status, _, raw := m.call(t, a.token, method, path, params)
					t.Logf("%s = %d %.300s", what, status, raw)
					others := m.others(a)
					if status == http.StatusBadRequest {
						// A refusal may quote the query: what the caller
						// wrote is no one else's data.
						others = slices.DeleteFunc(others, func(w string) bool { return strings.Contains(q.expr, w) })
					}
					expectNone(g, what, raw, others)
					if q.refused {
						g.Expect(status).To(gomega.Equal(http.StatusBadRequest), "%s: %s", what, raw)
					}
					switch status {
					case http.StatusBadRequest:
						g.Expect(ocmCode(raw)).To(gomega.Equal("FLEET-MGMT-29"), "%s: %s", what, raw)
					case http.StatusOK:
						for _, s := range seriesOf(t, what, raw) {
							if id, ok := s.Metric["clusterID"]; ok && !strings.HasPrefix(q.expr, "count_values") {
								g.Expect(a.ids()).To(gomega.ContainElement(string(id)), "%s: series %s:\n%s", what, s.Metric, raw)
							}
						}
					default:
						t.Errorf("%s = %d, want 200 or 400 FLEET-MGMT-29: %s", what, status, raw)
					}
				})
			}
		}
		// A range query longer than --user-metrics-max-range is refused.
		for _, path := range userMetricsRangeEndpoints {
			what := "a query_range of 2h through " + path
			t.Run(what, func(t *testing.T) {
				g := gomega.NewWithT(t)
				now := time.Now()
				status, _, raw := m.call(t, a.token, http.MethodGet, path, url.Values{"query": {metricCPU},
					"start": {unix(now.Add(-2 * time.Hour))}, "end": {unix(now)}, "step": {"60"}})
				g.Expect(status).To(gomega.Equal(http.StatusBadRequest), "%s: %s", what, raw)
				g.Expect(ocmCode(raw)).To(gomega.Equal("FLEET-MGMT-29"), "%s: %s", what, raw)
			})
		}
	})

	t.Run("a query the backend cannot evaluate", func(t *testing.T) {
		// Two series on each side of a one-to-one match on no label: the
		// backend refuses it when it runs, and its message names series.
		g := gomega.NewWithT(t)
		for _, path := range []string{"/metrics/query", "/metrics/api/v1/query"} {
			what := "cpu * on() cpu as " + a.id + " through " + path
			status, _, raw := m.call(t, a.token, http.MethodGet, path, url.Values{"query": {"cpu * on() cpu"}})
			t.Logf("%s = %d %s", what, status, raw)
			g.Expect(status).To(gomega.Equal(http.StatusBadRequest), "%s: %s", what, raw)
			g.Expect(ocmCode(raw)).To(gomega.Equal("FLEET-MGMT-30"), "%s: %s", what, raw)
			expectNone(g, what, raw, m.others(a))
		}
	})

	t.Run("an organisation without clusters reads nothing", func(t *testing.T) {
		g := gomega.NewWithT(t)
		none := &metricsOrg{id: "org-um-none"}
		token := m.s.fm.token(none.id, "nobody")
		for _, expr := range []string{metricCPU, `{__name__=~".+"}`, `cpu{clusterID="` + aID(m) + `"}`, `{clusterID!=""}`} {
			what := fmt.Sprintf("%s as %s", expr, none.id)
			status, _, raw := m.call(t, token, http.MethodGet, "/metrics/query", url.Values{"query": {expr}})
			g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
			g.Expect(seriesOf(t, what, raw)).To(gomega.BeEmpty(), "%s: %s", what, raw)
			expectNone(g, what, raw, m.others(none))
		}
		what := "GET /metrics as " + none.id
		status, header, raw := m.call(t, token, http.MethodGet, "/metrics", nil)
		g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
		g.Expect(header.Get("Content-Type")).To(gomega.HavePrefix("text/plain"), what)
		families := parseText(t, what, raw)
		g.Expect(families).NotTo(gomega.HaveKey(metricCPU), "%s:\n%s", what, raw)
		g.Expect(families).NotTo(gomega.HaveKey("fleet_manager_cluster_info"), "%s:\n%s", what, raw)
		expectNone(g, what, raw, m.others(none))
	})

	t.Run("admin", func(t *testing.T) {
		g := gomega.NewWithT(t)
		what := "GET /metrics/query cpu as a fleet admin"
		status, _, raw := m.call(t, m.admin, http.MethodGet, "/metrics/query", url.Values{"query": {metricCPU}})
		g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
		samples := seriesOf(t, what, raw)
		g.Expect(clusterIDs(samples)).To(gomega.ContainElements(m.allIDs()), "%s:\n%s", what, raw)
		expectLabelsAllowed(g, what, samples)
		g.Expect(string(raw)).NotTo(gomega.ContainSubstring(secretLabelMark), what)

		what = "GET /metrics as a fleet admin"
		status, header, raw := m.call(t, m.admin, http.MethodGet, "/metrics", nil)
		g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
		g.Expect(header.Get("Content-Type")).To(gomega.HavePrefix("text/plain"), what)
		families := parseText(t, what, raw)
		g.Expect(familyLabelValues(families, metricCPU, "clusterID")).To(gomega.ContainElements(m.allIDs()), "%s:\n%s", what, raw)
		// Other tests' clusters share the database: the admin sees them too.
		g.Expect(familyLabelValues(families, "fleet_manager_cluster_info", "clusterID")).To(gomega.ContainElements(m.allIDs()), "%s:\n%s", what, raw)
		g.Expect(families).NotTo(gomega.HaveKey(metricSecret), what)
	})

	t.Run("promtool", func(t *testing.T) {
		g := gomega.NewWithT(t)
		promtool, err := promtest.Promtool()
		if err != nil {
			t.Fatal(err)
		}
		if help, _ := exec.Command(promtool, "query", "instant", "--help").CombinedOutput(); !strings.Contains(string(help), "--http.config.file") {
			t.Fatalf("%s has no --http.config.file (Debian's promtool 2.42 has none): run scripts/prometheus/build-promtool.sh", promtool)
		}
		dir := t.TempDir()
		tokenFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokenFile, []byte(a.token), 0o600); err != nil {
			t.Fatal(err)
		}
		httpConfig := filepath.Join(dir, "http.yml")
		if err := os.WriteFile(httpConfig, []byte("authorization:\n  type: Bearer\n  credentials_file: "+tokenFile+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(promtool, "query", "instant", "--http.config.file="+httpConfig, m.s.fm.Base+"/metrics", metricCPU).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool query instant: %v\n%s", err, out)
		}
		for _, id := range a.ids() {
			g.Expect(string(out)).To(gomega.ContainSubstring(`clusterID="`+id+`"`), "promtool's answer:\n%s", out)
		}
		g.Expect(strings.Count(string(out), "=>")).To(gomega.Equal(len(a.clusters)), "promtool's answer:\n%s", out)
		expectNone(g, "promtool query instant", out, m.others(a))
	})

	t.Run("a second Prometheus scrapes the text endpoint", func(t *testing.T) {
		g := gomega.NewWithT(t)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(a.token), 0o600); err != nil {
			t.Fatal(err)
		}
		base, err := url.Parse(m.s.fm.Base)
		if err != nil {
			t.Fatal(err)
		}
		scrape := fmt.Sprintf(`- job_name: fleet
  honor_labels: true
  scrape_interval: 2s
  scrape_timeout: 2s
  metrics_path: %s/metrics
  authorization:
    type: Bearer
    credentials_file: %s
  static_configs:
  - targets: [%q]
`, base.Path, tokenFile, base.Host)
		customer := promtest.Start(t, promtest.Options{ScrapeConfigs: scrape})
		customer.WaitForSeries(t, `up{job="fleet"} == 1`, 1)
		got := customer.WaitForSeries(t, metricCPU, len(a.clusters))
		g.Expect(clusterIDs(got)).To(gomega.Equal(a.ids()), "the scraped %s", metricCPU)
		g.Expect(clusterIDs(customer.Query(t, `fleet_manager_cluster_info`))).To(gomega.Equal(a.ids()), "the scraped fleet_manager_cluster_info")
		g.Expect(clusterIDs(customer.Query(t, `count by (clusterID) ({clusterID!=""})`))).To(gomega.Equal(a.ids()),
			"every clusterID the second Prometheus holds")
		g.Expect(customer.Query(t, `{__name__="secret_metric"}`)).To(gomega.BeEmpty())
		g.Expect(customer.Query(t, `{secret!=""}`)).To(gomega.BeEmpty())
	})
}

// TestUserMetricsRateLimit: past its burst, an organisation is answered 429
// FLEET-MGMT-31 with a Retry-After; another organisation is not; after the
// wait it is served again.
func TestUserMetricsRateLimit(t *testing.T) {
	t.Parallel()
	exporter := promtest.NewExporter(t)
	exporter.Set(`cpu{clusterID="cid-none"} 1` + "\n")
	backend := promtest.Start(t, promtest.Options{ScrapeConfigs: exporter.ScrapeConfig("clusters")})
	fm := startFleetManager(t, hydratest.Start(t), "--user-metrics-backend-url="+backend.URL(),
		"--user-metrics-rate=1", "--user-metrics-burst=2")
	g := gomega.NewWithT(t)
	m := &metricsFleet{t: t, g: g, s: &stack{t: t, g: g, fm: fm}}
	first, second := fm.token("org-rl-1", "ann"), fm.token("org-rl-2", "bea")

	statuses := map[int]int{}
	var retryAfter []string
	for range 10 {
		status, header, raw := m.call(t, first, http.MethodGet, "/metrics/query", url.Values{"query": {"cluster:cpu_usage_cores:sum"}})
		statuses[status]++
		switch status {
		case http.StatusTooManyRequests:
			g.Expect(ocmCode(raw)).To(gomega.Equal("FLEET-MGMT-31"), "429 body: %s", raw)
			retryAfter = append(retryAfter, header.Get("Retry-After"))
		case http.StatusOK:
			seriesOf(t, "a query within the rate", raw)
		default:
			t.Errorf("a query = %d, want 200 or 429: %s", status, raw)
		}
	}
	g.Expect(statuses[http.StatusOK]).To(gomega.BeNumerically(">=", 2), "the burst is served: %v", statuses)
	g.Expect(statuses[http.StatusTooManyRequests]).To(gomega.BeNumerically(">=", 1), "past the burst: %v", statuses)
	for _, ra := range retryAfter {
		secs, err := strconv.Atoi(ra)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "Retry-After %q", ra)
		g.Expect(secs).To(gomega.BeNumerically(">=", 1), "Retry-After %q", ra)
	}

	// The limit is the organisation's: another one is served at once.
	status, _, raw := m.call(t, second, http.MethodGet, "/metrics/query", url.Values{"query": {"cluster:cpu_usage_cores:sum"}})
	g.Expect(status).To(gomega.Equal(http.StatusOK), "another organisation: %s", raw)
	// The text endpoints count too.
	g.Eventually(func() int {
		status, _, _ := m.call(t, first, http.MethodGet, "/metrics", nil)
		return status
	}).WithTimeout(10*time.Second).WithPolling(300*time.Millisecond).Should(gomega.Equal(http.StatusOK), "the first organisation after its wait")
	seen := map[int]bool{}
	for range 5 {
		status, _, _ := m.call(t, first, http.MethodGet, "/metrics", nil)
		seen[status] = true
	}
	g.Expect(seen).To(gomega.HaveKey(http.StatusTooManyRequests), "GET /metrics past the burst: %v", seen)
}

// TestUserMetricsBackendCredentials: the fleet manager reaches a backend
// that, like Observatorium's read path, wants a bearer token and a tenant
// header; it sends both, and a rotated token file is read again without a
// restart. A backend that refuses the token is no success for the caller.
func TestUserMetricsBackendCredentials(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	exporter := promtest.NewExporter(t)
	exporter.Set(`cluster:cpu_usage_cores:sum{clusterID="cid-backend"} 3` + "\n")
	backend := promtest.Start(t, promtest.Options{ScrapeConfigs: exporter.ScrapeConfig("clusters")})
	backend.WaitForSeries(t, metricCPUUsage, 1)
	target, err := url.Parse(backend.URL())
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	want, refusedCalls, servedCalls := "first-secret", 0, 0
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := r.Header.Get("Authorization") == "Bearer "+want && r.Header.Get("THANOS-TENANT") == "fleet"
		if ok {
			servedCalls++
		} else {
			refusedCalls++
		}
		mu.Unlock()
		if !ok {
			http.Error(w, "no such token or tenant", http.StatusUnauthorized)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	tokenFile := filepath.Join(t.TempDir(), "backend-token")
	writeToken := func(token string) {
		t.Helper()
		tmp := tokenFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("first-secret")
	fm := startFleetManager(t, hydratest.Start(t), "--user-metrics-backend-url="+gate.URL,
		"--user-metrics-backend-token-file="+tokenFile, "--user-metrics-tenant-header=THANOS-TENANT", "--user-metrics-tenant=fleet")
	m := &metricsFleet{t: t, g: g, s: &stack{t: t, g: g, fm: fm}}
	admin := fm.token("sre", "bob", "fleet-admin")
	read := func() (int, []byte) {
		status, _, raw := m.call(t, admin, http.MethodGet, "/metrics/query", url.Values{"query": {metricCPUUsage}})
		return status, raw
	}

	status, raw := read()
	g.Expect(status).To(gomega.Equal(http.StatusOK), "a query through the gate: %s", raw)
	samples := seriesOf(t, "a query through the gate", raw)
	g.Expect(clusterIDs(samples)).To(gomega.Equal([]string{"cid-backend"}), "%s", raw)
	g.Expect(float64(samples[0].Value)).To(gomega.Equal(3.0))

	// The backend's token changes before the file does: the caller gets an
	// error, never an empty success.
	mu.Lock()
	want = "second-secret"
	mu.Unlock()
	status, raw = read()
	g.Expect(status).NotTo(gomega.Equal(http.StatusOK), "a query the backend refused: %s", raw)
	g.Expect(ocmCode(raw)).NotTo(gomega.BeEmpty(), "an OCM error body: %s", raw)
	g.Expect(string(raw)).NotTo(gomega.ContainSubstring("secret"), "the answer quotes a backend token: %s", raw)
	t.Logf("a query the backend refused for its token = %d %s", status, raw)

	// The rotated file is read again, without a restart.
	writeToken("second-secret")
	g.Eventually(func() int { s, _ := read(); return s }).WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(http.StatusOK), "a query after the token file was rotated")
	mu.Lock()
	defer mu.Unlock()
	g.Expect(servedCalls).To(gomega.BeNumerically(">=", 2), "queries the gate let through")
	g.Expect(refusedCalls).To(gomega.BeNumerically(">=", 1), "queries the gate refused")
}

// TestUserMetricsByClusterName: with --user-metrics-cluster-label=cluster
// and --user-metrics-cluster-label-source=name, the series are matched by
// the ManagedCluster's name: each organisation reads its clusters' series by
// their cluster label, the clusterID label (now off the allow-list) is
// dropped, and another organisation's names select nothing.
func TestUserMetricsByClusterName(t *testing.T) {
	m := newMetricsFleet(t, "umn", "--user-metrics-cluster-label=cluster", "--user-metrics-cluster-label-source=name")
	a, b := m.orgs[0], m.orgs[1]
	names := func(o *metricsOrg) []string {
		var out []string
		for _, c := range o.clusters {
			out = append(out, c.name)
		}
		slices.Sort(out)
		return out
	}
	labelValues := func(samples []*model.Sample, label model.LabelName) []string {
		out := []string{}
		for _, s := range samples {
			out = append(out, string(s.Metric[label]))
		}
		slices.Sort(out)
		return out
	}
	for _, org := range m.orgs {
		t.Run("query as "+org.id, func(t *testing.T) {
			g := gomega.NewWithT(t)
			what := "cpu as " + org.id
			status, _, raw := m.call(t, org.token, http.MethodGet, "/metrics/query", url.Values{"query": {metricCPU}})
			g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
			samples := seriesOf(t, what, raw)
			g.Expect(labelValues(samples, "cluster")).To(gomega.Equal(names(org)), "%s: %s", what, raw)
			for _, s := range samples {
				g.Expect(s.Metric).NotTo(gomega.HaveKey(model.LabelName("clusterID")), "%s: clusterID is off the allow-list now: %s", what, raw)
				g.Expect(s.Metric).NotTo(gomega.HaveKey(model.LabelName("secret")), "%s: %s", what, raw)
			}
			expectNone(g, what, raw, m.others(org))
		})
		t.Run("GET /metrics as "+org.id, func(t *testing.T) {
			g := gomega.NewWithT(t)
			what := "GET /metrics as " + org.id
			status, _, raw := m.call(t, org.token, http.MethodGet, "/metrics", nil)
			g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
			families := parseText(t, what, raw)
			g.Expect(familyLabelValues(families, metricCPU, "cluster")).To(gomega.Equal(names(org)), "%s:\n%s", what, raw)
			g.Expect(familyLabelValues(families, "fleet_manager_cluster_info", "cluster")).To(gomega.Equal(names(org)), "%s:\n%s", what, raw)
			expectNone(g, what, raw, m.others(org))
		})
	}
	t.Run("another organisation's names select nothing", func(t *testing.T) {
		g := gomega.NewWithT(t)
		for _, expr := range []string{`cpu{cluster="` + b.clusters[0].name + `"}`, `cpu{cluster=~".+"} unless on() cpu{cluster="` + a.clusters[0].name + `"}`,
			`{cluster=~"` + b.clusters[0].name + `|` + b.clusters[1].name + `"}`, `sum by (cluster) (cpu)`} {
			what := expr + " as " + a.id
			status, _, raw := m.call(t, a.token, http.MethodGet, "/metrics/query", url.Values{"query": {expr}})
			g.Expect(status).To(gomega.Equal(http.StatusOK), "%s: %s", what, raw)
			for _, s := range seriesOf(t, what, raw) {
				g.Expect(names(a)).To(gomega.ContainElement(string(s.Metric["cluster"])), "%s: %s", what, raw)
			}
			expectNone(g, what, raw, m.others(a))
		}
	})
}
