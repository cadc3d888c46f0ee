package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestPercentile checks the nearest-rank quantiles the reports print.
func TestPercentile(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ds := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	g.Expect(percentile(ds, .5)).To(gomega.Equal(50 * time.Millisecond))
	g.Expect(percentile(ds, .99)).To(gomega.Equal(99 * time.Millisecond))
	g.Expect(percentile(ds, 1)).To(gomega.Equal(100 * time.Millisecond))
	g.Expect(percentile(ds, 0)).To(gomega.Equal(1 * time.Millisecond))
	g.Expect(ds[0]).To(gomega.Equal(100*time.Millisecond), "percentile must not sort its argument")
	g.Expect(percentile(nil, .99)).To(gomega.BeZero())
	g.Expect(percentile([]time.Duration{7}, .5)).To(gomega.Equal(time.Duration(7)))
}

// parseOptions parses args as main does.
func parseOptions(t *testing.T, args ...string) options {
	t.Helper()
	o := defaultOptions()
	fs := pflag.NewFlagSet("fleet-bench", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %v: %v", args, err)
	}
	o.applyQuick(fs)
	return o
}

// TestRegistrationOptions checks that --quick shrinks the registration
// sizes the caller did not give, and that validation refuses what cannot run.
func TestRegistrationOptions(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	g.Expect(parseOptions(t, "--registrations").validate()).To(gomega.Succeed())

	quick := parseOptions(t, "--registrations", "--quick", "--bulk-registrations=500")
	g.Expect(quick.validate()).To(gomega.Succeed())
	g.Expect(quick.LoadedRegistrations).To(gomega.Equal(3000))
	g.Expect(quick.BulkRegistrations).To(gomega.Equal(500), "a size given stays")
	g.Expect(quick.CreateDuration).To(gomega.Equal(2 * time.Second))
	g.Expect(quick.Hubs).To(gomega.Equal(10))

	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--registrations", "--reads"}, "--registrations"},
		{[]string{"--registrations", "--create-orgs=1"}, "--create-orgs"},
		{[]string{"--registrations", "--loaded-registrations=99"}, "--loaded-registrations"},
		{[]string{"--registrations", "--create-duration=0s"}, "--create-duration"},
		{[]string{"--registrations", "--create-count=-1"}, "--create-count"},
		{[]string{"--registrations", "--create-concurrency=0"}, "--create-concurrency"},
		{[]string{"--registrations", "--bulk-batch-size=0"}, "--bulk-batch-size"},
		{[]string{"--registrations", "--bulk-clients=0"}, "--bulk-clients"},
		{[]string{"--registrations", "--delivery-timeout=10ms"}, "--delivery-timeout"},
		{[]string{"--registrations", "--hubs=10", "--hub-capacity=1000"}, "--hub-capacity"},
	} {
		err := parseOptions(t, tc.args...).validate()
		g.Expect(err).To(gomega.HaveOccurred(), "%v", tc.args)
		g.Expect(err.Error()).To(gomega.ContainSubstring(tc.flag), "%v", tc.args)
	}
	// A count replaces the duration; the capacity check is the registrations mode's.
	g.Expect(parseOptions(t, "--registrations", "--create-duration=0s", "--create-count=50").validate()).To(gomega.Succeed())
	g.Expect(parseOptions(t, "--hubs=10", "--hub-capacity=1000").validate()).To(gomega.Succeed())
}

// TestBatchItems checks that the bulk onboarding's batches cover every
// registration once, the last one short, with names unique.
func TestBatchItems(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	o := defaultOptions()
	o.BulkRegistrations, o.BulkBatchSize = 2500, 1000
	g.Expect(o.batchCount()).To(gomega.Equal(3))
	names := map[string]bool{}
	for b := range o.batchCount() {
		for _, it := range batchItems(o, b) {
			g.Expect(names).NotTo(gomega.HaveKey(it.Name))
			names[it.Name] = true
			g.Expect(*it.Zone).To(gomega.Equal(benchZone))
		}
	}
	g.Expect(names).To(gomega.HaveLen(2500))
	g.Expect(batchItems(o, 2)).To(gomega.HaveLen(500))
	g.Expect(batchItems(o, 3)).To(gomega.BeEmpty())
}

// TestTally checks how a batch's answer is counted: 202 with a cluster is
// created, anything else a failure of its status and code.
func TestTally(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	created := &public.Cluster{Id: "a"}
	taken := &public.Error{Code: "FLEET-MGMT-19"}
	failures := map[string]int{}
	n := tally([]public.ClusterBatchItemResult{{Status: 202, Cluster: created}, {Status: 409, Error: taken}, {Status: 409, Error: taken},
		{Status: 202}, {Status: 500}}, failures)
	g.Expect(n).To(gomega.Equal(1))
	g.Expect(failures).To(gomega.Equal(map[string]int{"409 FLEET-MGMT-19": 2, "202": 1, "500": 1}))
	g.Expect(describeFailures(failures)).To(gomega.Equal("2 x 409 FLEET-MGMT-19, 1 x 202, 1 x 500"))
	g.Expect(describeFailures(nil)).To(gomega.Equal("none"))

	g.Expect(failureKey(0, nil)).To(gomega.Equal("transport"))
	g.Expect(failureKey(503, []byte(`{"kind":"Error","code":"FLEET-MGMT-9","reason":"x"}`))).To(gomega.Equal("503 FLEET-MGMT-9"))
	g.Expect(failureKey(502, []byte(`<html>bad gateway</html>`))).To(gomega.Equal("502"))
}

// regFixture is a run's results with the given create rates, each scenario
// all Delivered, and reads with the given p99.
func regFixture(rates []float64, reads map[string]time.Duration) *regResults {
	r := &regResults{opts: defaultOptions(), readRows: 300000}
	for i, rate := range rates {
		c := createResult{created: int(rate * 10), posting: 10 * time.Second, rowsBefore: 100 + i}
		c.Name = []string{"create, 1 org, 100", "create, 20 orgs, 100", "create, 1 org, 300k", "create, 20 orgs, 300k"}[i]
		c.delivery = deliveryOutcome{want: c.created, delivered: c.created, after: 12 * time.Second}
		r.creates = append(r.creates, c)
	}
	for _, name := range []string{"list page of 100", "search name", "get by id", "import material"} {
		if d, ok := reads[name]; ok {
			r.reads.phases = append(r.reads.phases, phase{Name: name, Requests: 1, Latencies: []time.Duration{d}})
		}
	}
	return r
}

// TestRegistrationTargets checks the verdicts against the targets,
// on each side of each bound: creates and their delivery, bulk onboarding
// (not offered is a miss), the lists' and the gets' p99.
func TestRegistrationTargets(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	r := regFixture([]float64{300, 280, 279, 500}, map[string]time.Duration{
		"list page of 100": 49 * time.Millisecond, "search name": 50 * time.Millisecond,
		"get by id": 9 * time.Millisecond, "import material": 11 * time.Millisecond})
	r.creates[3].delivery.delivered-- // one not Delivered
	met := map[string]bool{}
	figures := map[string]string{}
	for _, tg := range registrationTargets(r) {
		met[tg.name], figures[tg.name] = tg.met, tg.figures
	}
	g.Expect(met).To(gomega.Equal(map[string]bool{
		"creates at least 280/s and all Delivered: create, 1 org, 100":                true,
		"creates at least 280/s and all Delivered: create, 20 orgs, 100":              true,
		"creates at least 280/s and all Delivered: create, 1 org, 300k":               false,
		"creates at least 280/s and all Delivered: create, 20 orgs, 300k":             false,
		"bulk onboarding of 300000 registrations answered and Delivered within 10m0s": false,
		"p99 under 50 ms: list page of 100":                                           true,
		"p99 under 50 ms: search name":                                                false,
		"p99 under 10 ms: get by id":                                                  true,
		"p99 under 10 ms: import material":                                            false,
	}))
	g.Expect(figures["bulk onboarding of 300000 registrations answered and Delivered within 10m0s"]).To(gomega.Equal("not offered by this server"))
	g.Expect(figures["creates at least 280/s and all Delivered: create, 1 org, 300k"]).To(
		gomega.ContainSubstring("279/s (5.0x rh-trex's 55.7/s; 0.93 of the rate at 100 rows)"))
	g.Expect(figures["creates at least 280/s and all Delivered: create, 20 orgs, 300k"]).To(
		gomega.ContainSubstring("only 4999 of 5000 Delivered after 12.00s"))

	r.bulk = bulkResult{offered: true, created: 300000, answered: 2 * time.Minute,
		delivery: deliveryOutcome{want: 300000, delivered: 300000, after: 9 * time.Minute}}
	bulk := registrationTargets(r)[4]
	g.Expect(bulk.met).To(gomega.BeTrue(), bulk.figures)
	g.Expect(bulk.figures).To(gomega.HavePrefix("300000 created, answered in 120.00s (2500 items/s), all 300000 Delivered 540.00s"))
	r.bulk.delivery.after = 11 * time.Minute
	g.Expect(registrationTargets(r)[4].met).To(gomega.BeFalse(), "Delivered after the 10 minutes")
}

// TestReportRegistrations checks that the report prints every scenario, a
// bulk onboarding not offered as such, and the targets.
func TestReportRegistrations(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	r := regFixture([]float64{300, 280}, map[string]time.Duration{"get by id": 3 * time.Millisecond})
	r.creates[1].failures = map[string]int{"503 FLEET-MGMT-9": 2}
	var out bytes.Buffer
	reportRegistrations(&out, r)
	text := out.String()
	g.Expect(text).To(gomega.ContainSubstring("bulk onboarding: not offered (no POST /clusters:batch on this server)"))
	g.Expect(text).To(gomega.ContainSubstring("refused (create, 20 orgs, 100): 2 x 503 FLEET-MGMT-9"))
	g.Expect(text).To(gomega.MatchRegexp(`create, 1 org, 100\s+100\s+3000\s+0\s+10.00s\s+300\s`))
	g.Expect(text).To(gomega.MatchRegexp(`PASS\s+p99 under 10 ms: get by id\s+p99 3.0ms`))
	g.Expect(text).To(gomega.MatchRegexp(`MISS\s+creates at least 280/s and all Delivered: create, 20 orgs, 100`))
	g.Expect(strings.Count(text, "PASS") + strings.Count(text, "MISS")).To(gomega.Equal(4))
}

// TestTableSizes checks the deep page and the labels of table sizes.
func TestTableSizes(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	g.Expect(deepPage(300000)).To(gomega.Equal(1500))
	g.Expect(deepPage(150)).To(gomega.Equal(1))
	g.Expect(rowsLabel(300000)).To(gomega.Equal("300k"))
	g.Expect(rowsLabel(3500)).To(gomega.Equal("3500"))
	g.Expect(loadedName(42)).To(gomega.Equal("loaded-0000042"))
	o := defaultOptions()
	o.Hubs, o.LoadedRegistrations, o.BulkRegistrations = 100, 300000, 300001
	g.Expect(o.registrationsPerHub()).To(gomega.Equal(6001))
}
