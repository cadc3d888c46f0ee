package usermetrics

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
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
	vec := model.Vector{
		{Metric: model.Metric{"__name__": "cpu", "clusterID": "a-1", "node": "n1", "secret": "s1"}, Value: 1},
		{Metric: model.Metric{"__name__": "cpu", "clusterID": "a-1", "node": "n1", "secret": "s2"}, Value: 2},
		{Metric: model.Metric{"__name__": "cpu", "clusterID": "a-2", "node": "n1", "secret": "s3"}, Value: 3},
	}
	res := s.result(answer{Value: vec}, allowed)
	got := res.Data.Result.(model.Vector)
	g.Expect(got).To(HaveLen(2), "series that differ only in a dropped label collapse into the first")
	g.Expect(got[0].Metric).To(Equal(model.Metric{"__name__": "cpu", "clusterID": "a-1", "node": "n1"}))
	g.Expect(got[0].Value).To(Equal(model.SampleValue(1)))
	g.Expect(res.Data.ResultType).To(Equal(model.ValVector))

	mat := model.Matrix{{Metric: model.Metric{"clusterID": "a-1", "pod": "p"}, Values: []model.SamplePair{{Timestamp: 1, Value: 1}}}}
	res = s.result(answer{Value: mat}, allowed)
	g.Expect(res.Data.Result.(model.Matrix)[0].Metric).To(Equal(model.Metric{"clusterID": "a-1"}))
	g.Expect(res.Data.ResultType).To(Equal(model.ValMatrix))
}

func TestBackendErrorLeavesOutLabelSets(t *testing.T) {
	g := NewWithT(t)
	err := backendError(&promv1.Error{Type: promv1.ErrExec,
		Msg: `found duplicate series for the match group {} on the right hand-side of the operation: [{__name__="cpu", clusterID="a-1", secret="hunter2"}, {__name__="cpu", clusterID="a-2", secret="s"}];many-to-many matching not allowed`})
	g.Expect(fleet.ErrorCodeOf(err)).To(Equal(fleet.CodeMetricsBackend))
	g.Expect(fleet.ErrorMessageOf(err)).NotTo(ContainSubstring("hunter2"))
	g.Expect(fleet.ErrorMessageOf(err)).To(ContainSubstring("many-to-many matching not allowed"))
	g.Expect(fleet.ErrorCodeOf(backendError(&promv1.Error{Type: promv1.ErrTimeout}))).To(Equal(fleet.CodeUnavailable))
	g.Expect(fleet.ErrorCodeOf(backendError(&promv1.Error{Type: promv1.ErrServer, Msg: "token abc refused"}))).To(Equal(fleet.CodeUnavailable))
	g.Expect(fleet.ErrorMessageOf(backendError(&promv1.Error{Type: promv1.ErrServer, Msg: "token abc refused"}))).NotTo(ContainSubstring("abc"))
}
