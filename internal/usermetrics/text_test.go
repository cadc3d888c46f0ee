package usermetrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestLoadAllowList(t *testing.T) {
	g := NewWithT(t)
	def, err := LoadAllowList("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(def.For("any", false).Metrics).To(HaveKey("cluster:cpu_usage_cores:sum"))
	g.Expect(def.For("any", false).Inventory).To(HaveLen(len(inventorySeries)))

	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "allow.yaml")
		g.Expect(os.WriteFile(p, []byte(text), 0o600)).To(Succeed())
		return p
	}
	a, err := LoadAllowList(write("metrics: [cpu]\nlabels: [node]\norganizations:\n  org-b: {metrics: [extra], labels: [pod]}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.For("org-a", false).Metrics).To(Equal(map[string]bool{"cpu": true}))
	g.Expect(a.For("org-b", false).Metrics).To(Equal(map[string]bool{"cpu": true, "extra": true}))
	g.Expect(a.For("org-b", false).Labels).To(Equal(map[string]bool{"node": true, "pod": true}))
	g.Expect(a.For("", true).Metrics).To(Equal(map[string]bool{"cpu": true, "extra": true}))

	for text, reason := range map[string]string{
		"metrics: [\"a b\"]\n":                      "is not a metric name",
		"labels: [__name__]\n":                      "is not a label name",
		"inventory: [secrets]\n":                    "is not one of",
		"metric: [cpu]\n":                           "unknown field",
		"organizations:\n  o: {labels: [\"1x\"]}\n": `organizations["o"]`,
	} {
		_, err := LoadAllowList(write(text))
		g.Expect(err).To(MatchError(ContainSubstring(reason)), text)
	}
}

func TestInventorySeriesParseAsPrometheusText(t *testing.T) {
	g := NewWithT(t)
	r := inventoryRenderer{prefix: "fleet_manager_", clusterLabel: "clusterID", source: SourceClusterID}
	inv := fleet.MetricsInventory{
		Clusters: []fleet.MetricsCluster{
			{ManagedClusterID: "m1", Name: "one", ClusterID: "id-1", OrgID: "org-a", Phase: fleet.Phase("ready"), Available: fleet.ConditionTrue,
				Capacity: fleet.StringMapJSON(`{"cpu":"8","memory":"32Gi"}`), Allocatable: fleet.StringMapJSON(`{"cpu":"7500m"}`)},
			{ManagedClusterID: "m2", Name: "two", OrgID: "org-a", Available: fleet.ConditionFalse},
		},
		Compliance: []fleet.PolicyComplianceState{
			{ManagedClusterID: "m1", PolicyID: "p1", PolicyName: "pol", State: "NonCompliant"},
			{ManagedClusterID: "m2", PolicyID: "p1", PolicyName: "pol", State: "Pending"},
			{ManagedClusterID: "m9", PolicyID: "p1", PolicyName: "pol", State: "Compliant"},
		},
		Phases: []fleet.PhaseCount{{OrgID: "org-a", Phase: "ready", Count: 1}},
		Pools:  []fleet.PoolUsage{{PoolID: "pl", PoolName: "small", OrgID: "org-a", Clusters: 2, CapacityUnits: 20, ReservedUnits: 5}},
	}
	all := map[string]bool{}
	for _, s := range inventorySeries {
		all[s] = true
	}
	fams := newFamilies()
	r.render(fams, inv, all)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range fams.sorted() {
		g.Expect(enc.Encode(mf)).To(Succeed())
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&buf)
	g.Expect(err).NotTo(HaveOccurred())
	value := func(name string, want map[string]string) float64 {
		mf, ok := parsed[name]
		g.Expect(ok).To(BeTrue(), name)
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range want {
				match = match && got[k] == v
			}
			if match {
				return m.GetGauge().GetValue()
			}
		}
		g.Expect(false).To(BeTrue(), "%s%v not found", name, want)
		return 0
	}
	g.Expect(value("fleet_manager_cluster_capacity", map[string]string{"clusterID": "id-1", "resource": "memory"})).To(Equal(float64(32 << 30)))
	g.Expect(value("fleet_manager_cluster_allocatable", map[string]string{"clusterID": "id-1", "resource": "cpu"})).To(Equal(7.5))
	g.Expect(value("fleet_manager_cluster_available", map[string]string{"name": "two"})).To(Equal(0.0))
	g.Expect(value("fleet_manager_cluster_policy_compliant", map[string]string{"clusterID": "id-1", "policy": "pol"})).To(Equal(0.0))
	g.Expect(parsed["fleet_manager_cluster_policy_compliant"].GetMetric()).To(HaveLen(1), "pending and unknown clusters' compliance are left out")
	g.Expect(value("fleet_manager_cluster_phase", map[string]string{"clusterID": "id-1", "phase": "ready"})).To(Equal(1.0))
	g.Expect(value("fleet_manager_registrations", map[string]string{"org_id": "org-a", "phase": "ready"})).To(Equal(1.0))
	g.Expect(value("fleet_manager_pool_reserved_units", map[string]string{"pool": "small"})).To(Equal(5.0))

	only := newFamilies()
	r.render(only, inv, map[string]bool{seriesClusterInfo: true})
	g.Expect(only.sorted()).To(HaveLen(1))
}

func TestResultKeepsOnlyAllowedLabels(t *testing.T) {
	g := NewWithT(t)
	s := &Service{cfg: Config{ClusterLabel: "clusterID"}}
	allowed := Allowed{Labels: map[string]bool{"node": true}}
	var ans answer
	g.Expect(json.Unmarshal([]byte(`{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"__name__":"cpu","clusterID":"a-1","node":"n1","secret":"s1"},"value":[1700000000.5,"1"]},
		{"metric":{"__name__":"cpu","clusterID":"a-1","node":"n1","secret":"s2"},"value":[1700000000.5,"2"]},
		{"metric":{"__name__":"cpu","clusterID":"a-2","node":"n1","secret":"s3"},"value":[1700000000.5,"3"]}]},
		"warnings":["w"]}`), &ans)).To(Succeed())
	res, err := s.result(ans, allowed)
	g.Expect(err).NotTo(HaveOccurred())
	body, err := json.Marshal(res)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).To(MatchJSON(`{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"__name__":"cpu","clusterID":"a-1","node":"n1"},"value":[1700000000.5,"1"]},
		{"metric":{"__name__":"cpu","clusterID":"a-2","node":"n1"},"value":[1700000000.5,"3"]}]},"warnings":["w"]}`),
		"labels off the allow-list dropped; series they alone told apart collapse into the first")

	ans = answer{}
	g.Expect(json.Unmarshal([]byte(`{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"clusterID":"a-1","pod":"p"},"values":[[1,"1"],[2,"2"]]}]}}`), &ans)).To(Succeed())
	res, err = s.result(ans, allowed)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ = json.Marshal(res)
	g.Expect(string(body)).To(MatchJSON(`{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"clusterID":"a-1"},"values":[[1,"1"],[2,"2"]]}]}}`))

	ans = answer{}
	g.Expect(json.Unmarshal([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`), &ans)).To(Succeed())
	res, err = s.result(ans, allowed)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ = json.Marshal(res)
	g.Expect(string(body)).To(MatchJSON(`{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`))
}

func TestSampleValue(t *testing.T) {
	g := NewWithT(t)
	v, ok := sampleValue(json.RawMessage(`[1700000000.5,"2.5"]`))
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(Equal(2.5))
	v, ok = sampleValue(json.RawMessage(`[1,"NaN"]`))
	g.Expect(ok).To(BeTrue())
	g.Expect(math.IsNaN(v)).To(BeTrue())
	for _, bad := range []string{`[1]`, `[1,2]`, `{}`, `[1,"x"]`} {
		_, ok = sampleValue(json.RawMessage(bad))
		g.Expect(ok).To(BeFalse(), bad)
	}
}

func TestBackendErrorLeavesOutLabelSets(t *testing.T) {
	g := NewWithT(t)
	cause := errors.New("the backend answered 422")
	err := backendError(422, answer{ErrorType: "execution",
		Error: `found duplicate series for the match group {} on the right hand-side of the operation: [{__name__="cpu", clusterID="a-1", secret="hunter2"}, {__name__="cpu", clusterID="a-2", secret="s"}];many-to-many matching not allowed`}, cause)
	g.Expect(fleet.ErrorCodeOf(err)).To(Equal(fleet.CodeMetricsBackend))
	g.Expect(fleet.ErrorMessageOf(err)).NotTo(ContainSubstring("hunter2"))
	g.Expect(fleet.ErrorMessageOf(err)).To(ContainSubstring("many-to-many matching not allowed"))
	g.Expect(fleet.ErrorCodeOf(backendError(503, answer{ErrorType: "timeout"}, cause))).To(Equal(fleet.CodeUnavailable))
	server := backendError(500, answer{ErrorType: "internal", Error: "token abc refused"}, cause)
	g.Expect(fleet.ErrorCodeOf(server)).To(Equal(fleet.CodeUnavailable))
	g.Expect(fleet.ErrorMessageOf(server)).NotTo(ContainSubstring("abc"))
	g.Expect(fleet.ErrorCodeOf(backendError(200, answer{}, errTooLarge))).To(Equal(fleet.CodeMetricsQueryRefused))
}
