package promtest_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/common/model"

	"github.com/fleetmanager/fleet-manager/internal/promtest"
)

// TestPrometheusScrapesTheExporter: the exporter's series arrive with their
// own labels (honor_labels), a changed body replaces them, and the target is
// up.
func TestPrometheusScrapesTheExporter(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	exporter := promtest.NewExporter(t)
	exporter.Set("# TYPE cpu gauge\n" +
		`cpu{clusterID="a",job="from-exporter",node="n1"} 1` + "\n" +
		`cpu{clusterID="b",node="n2"} 2` + "\n")
	prom := promtest.Start(t, promtest.Options{ScrapeConfigs: exporter.ScrapeConfig("exporter")})

	got := prom.WaitForSeries(t, `cpu`, 2)
	byCluster := map[string]model.Sample{}
	for _, s := range got {
		byCluster[string(s.Metric["clusterID"])] = *s
	}
	g.Expect(byCluster).To(gomega.HaveKey("a"))
	g.Expect(byCluster).To(gomega.HaveKey("b"))
	g.Expect(float64(byCluster["a"].Value)).To(gomega.Equal(1.0))
	g.Expect(string(byCluster["a"].Metric["job"])).To(gomega.Equal("from-exporter"), "honor_labels keeps the series' job")
	g.Expect(string(byCluster["b"].Metric["job"])).To(gomega.Equal("exporter"), "a series without a job gets the scrape's")
	g.Expect(string(byCluster["b"].Metric["node"])).To(gomega.Equal("n2"))
	g.Expect(exporter.Scrapes()).To(gomega.BeNumerically(">", 0))

	up := prom.Query(t, `up{job="exporter"}`)
	g.Expect(up).To(gomega.HaveLen(1))
	g.Expect(float64(up[0].Value)).To(gomega.Equal(1.0))

	exporter.Set(`cpu{clusterID="a",job="from-exporter",node="n1"} 5` + "\n")
	g.Eventually(func() float64 {
		v := prom.Query(t, `cpu{clusterID="a"}`)
		if len(v) != 1 {
			return -1
		}
		return float64(v[0].Value)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Equal(5.0))
	// A series the exporter stopped serving is marked stale on the next scrape.
	prom.WaitForSeries(t, `cpu{clusterID="b"}`, 0)
}

// TestPrometheusInstancesAreSeparate: two instances at once get ports and
// data folders of their own.
func TestPrometheusInstancesAreSeparate(t *testing.T) {
	t.Parallel()
	one, two := promtest.NewExporter(t), promtest.NewExporter(t)
	one.Set("only_one 1\n")
	two.Set("only_two 2\n")
	p1 := promtest.Start(t, promtest.Options{ScrapeConfigs: one.ScrapeConfig("one")})
	p2 := promtest.Start(t, promtest.Options{ScrapeConfigs: two.ScrapeConfig("two")})
	if p1.URL() == p2.URL() {
		t.Fatalf("both instances at %s", p1.URL())
	}
	p1.WaitForSeries(t, `only_one`, 1)
	p2.WaitForSeries(t, `only_two`, 1)
	if v := p1.Query(t, `only_two`); len(v) != 0 {
		t.Errorf("the first instance holds the second's series: %v", v)
	}
}

// TestPromtoolQueriesPrometheus: Debian's promtool is there and reads the
// instance through its HTTP API, as the e2e tests use it against the fleet
// manager.
func TestPromtoolQueriesPrometheus(t *testing.T) {
	t.Parallel()
	exporter := promtest.NewExporter(t)
	exporter.Set(`answer{clusterID="z"} 42` + "\n")
	prom := promtest.Start(t, promtest.Options{ScrapeConfigs: exporter.ScrapeConfig("exporter")})
	prom.WaitForSeries(t, `answer`, 1)
	promtool, err := promtest.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "query", "instant", prom.URL(), `answer`).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool query instant: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `clusterID="z"`) || !strings.Contains(string(out), "=> 42") {
		t.Errorf("promtool query instant answered:\n%s", out)
	}
}
