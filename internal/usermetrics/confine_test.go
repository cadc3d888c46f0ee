package usermetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func testConfiner() confiner {
	cfg := DefaultConfig()
	cfg.MaxRange = 24 * time.Hour
	cfg.MinStep = 10 * time.Second
	cfg.MaxPoints = 1000
	return newConfiner(cfg)
}

// testTime is when the tests' instant queries are evaluated.
var testTime = time.Unix(1700000000, 0)

func testWindow() evalWindow {
	return instant(testTime)
}

func testTarget() Target {
	return Target{
		Allowed: Allowed{
			Metrics: map[string]bool{"cpu": true, "mem": true},
			Labels:  map[string]bool{"node": true, "namespace": true},
		},
		Clusters: []string{"a-1", "a-2"},
	}
}

// selectors returns every selector of the rewritten query, parsed again.
func selectors(g *WithT, q string) []*parser.VectorSelector {
	expr, err := parser.ParseExpr(q)
	g.Expect(err).NotTo(HaveOccurred(), q)
	var out []*parser.VectorSelector
	_ = parser.Walk(visitFunc(func(n parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	}), expr, nil)
	return out
}

// clusterValues returns what a selector's cluster matchers let through of
// the candidate values.
func matches(vs *parser.VectorSelector, label, value string) bool {
	for _, m := range vs.LabelMatchers {
		if m.Name == label && !m.Matches(value) {
			return false
		}
	}
	return true
}

func TestConfineInjectsTheClustersIntoEverySelector(t *testing.T) {
	c := testConfiner()
	queries := []string{
		`cpu`,
		`{__name__=~".+"}`,
		`{__name__=~"c.*"}`,
		`cpu or on() mem{clusterID="b-1"}`,
		`cpu unless on() cpu{clusterID="a-1"}`,
		`label_replace(cpu, "node", "$1", "clusterID", "(.*)")`,
		`max_over_time(cpu[5m:1m])`,
		`absent(cpu{clusterID="b-1"})`,
		`count_values("node", cpu)`,
		`cpu offset 1h`,
		`cpu @ 1700000000`,
		`sum by (node) (rate(cpu[5m]))`,
		`cpu{clusterID=~".+"}`,
		`cpu{clusterID!="a-1"}`,
		`sum(cpu) / on() group_left sum(mem)`,
		`rate(cpu[5m] offset 1h)[10m:1m]`,
		`-cpu`,
		`(cpu)`,
		`time() - cpu`,
	}
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			g := NewWithT(t)
			out, err := c.confine(q, testTarget(), testWindow())
			g.Expect(err).NotTo(HaveOccurred())
			vss := selectors(g, out)
			g.Expect(vss).NotTo(BeEmpty())
			for _, vs := range vss {
				g.Expect(matches(vs, "clusterID", "b-1")).To(BeFalse(), "selector %s reads another organisation's cluster", vs)
				g.Expect(matches(vs, "clusterID", "")).To(BeFalse(), "selector %s reads series without a cluster", vs)
				g.Expect(matches(vs, labels.MetricName, "secret_metric")).To(BeFalse(), "selector %s reads a metric off the allow-list", vs)
			}
		})
	}
}

func TestConfineRefusesWhatTheAllowListDoesNotHold(t *testing.T) {
	c := testConfiner()
	refusedQueries := map[string]string{
		`secret_metric`:                                      "not on the allow-list",
		`{__name__="secret_metric"}`:                         "not on the allow-list",
		`cpu{secret="x"}`:                                    `label "secret"`,
		`sum by (secret) (cpu)`:                              `label "secret"`,
		`sum without (secret) (cpu)`:                         `label "secret"`,
		`cpu * on(secret) mem`:                               `label "secret"`,
		`cpu * on(node) group_left(secret) mem`:              `label "secret"`,
		`label_replace(cpu, "node", "$1", "secret", "(.*)")`: `label "secret"`,
		`label_replace(cpu, "clusterID", "b-1", "", "")`:     `writes label "clusterID"`,
		`label_join(cpu, "node", ",", "secret")`:             `label "secret"`,
		`count_values("clusterID", cpu)`:                     `writes label "clusterID"`,
		`count_values("secret", cpu)`:                        `writes label "secret"`,
		`sort_by_label(cpu, "node")`:                         "not enabled", // experimental functions stay off
		`{__name__=~".*"}`:                                   "non-empty matcher",
		`cpu[2d]`:                                            "range selector",
		`max_over_time(cpu[2d:1h])`:                          "subquery spans",
		`max_over_time(cpu[1h:1s])`:                          "finer than",
		`max_over_time(cpu[23h:])`:                           "explicit resolution",
		`cpu offset 2d`:                                      "offset",
		`cpu offset -2d`:                                     "offset",
		`sum(`:                                               "does not parse",
	}
	for q, reason := range refusedQueries {
		t.Run(q, func(t *testing.T) {
			g := NewWithT(t)
			_, err := c.confine(q, testTarget(), testWindow())
			g.Expect(err).To(HaveOccurred())
			g.Expect(fleet.ErrorCodeOf(err)).To(Equal(fleet.CodeMetricsQueryRefused))
			g.Expect(err.Error()).To(ContainSubstring(reason))
		})
	}
}

// TestConfineBoundsTheWholeQuerysReach checks the bounds on the query as a
// whole: each construct below stays within the bounds alone, but their
// nesting reads past --user-metrics-max-range or evaluates more than
// --user-metrics-max-points steps.
func TestConfineBoundsTheWholeQuerysReach(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRange = 30 * 24 * time.Hour
	cfg.MinStep = 10 * time.Second
	cfg.MaxPoints = 11000
	c := newConfiner(cfg)
	at := func(ago time.Duration) string {
		return fmt.Sprintf("%d", testTime.Add(-ago).Unix())
	}
	day := 24 * time.Hour
	for _, tc := range []struct {
		query  string
		window evalWindow
		reason string // empty: accepted
	}{
		// Nested subqueries' ranges add up.
		{query: `max_over_time(max_over_time(cpu[20d:1h])[20d:1h])`, reason: "further back"},
		{query: `max_over_time(rate(cpu[20d])[20d:1h])`, reason: "further back"},
		{query: `max_over_time(max_over_time(cpu[10d:1h])[20d:1h])`},
		{query: `max_over_time(max_over_time(max_over_time(cpu[10d:1h])[10d:1h])[11d:1h])`, reason: "further back"},
		// Offsets add up with them, and with each other.
		{query: `max_over_time((cpu offset 20d)[20d:1h])`, reason: "further back"},
		{query: `max_over_time(rate(cpu[5d] offset 11d)[5d:1h] offset 10d)`, reason: "further back"},
		{query: `max_over_time(max_over_time(cpu[5d:1h] offset 11d)[5d:1h] offset 10d)`, reason: "further back"},
		{query: `max_over_time(max_over_time(cpu[5d:1h] offset 10d)[5d:1h] offset 10d)`},
		{query: `max_over_time((cpu offset -20d)[1h:1m] offset -20d)`, reason: "further ahead"},
		{query: `max_over_time((cpu offset -20d)[20d:1h] offset -10d)`},
		// An @ modifier counts from the query's time.
		{query: `cpu @ ` + at(31*day), reason: "further back"},
		{query: `cpu @ ` + at(-31*day), reason: "further ahead"},
		{query: `rate(cpu[20d] @ ` + at(15*day) + `)`, reason: "further back"},
		{query: `max_over_time(cpu[1h:1m] @ ` + at(30*day) + `)`, reason: "further back"},
		{query: `cpu @ ` + at(29*day)},
		{query: `max_over_time(max_over_time(cpu[20d:1h] @ ` + at(0) + `)[20d:1h])`},
		{query: `max_over_time(max_over_time(cpu[20d:1h] @ ` + at(11*day) + `)[20d:1h])`, reason: "further back"},
		{query: `rate(cpu[20d] @ start())`, window: evalWindow{start: testTime.Add(-20 * day), end: testTime}},
		{query: `cpu @ ` + at(31*day), window: evalWindow{start: testTime.Add(-20 * day), end: testTime}},
		{query: `cpu @ ` + at(51*day), window: evalWindow{start: testTime.Add(-20 * day), end: testTime}, reason: "further back"},
		// An inner subquery is evaluated over the outer ones' ranges at its
		// own resolution, and the steps of a nesting add up.
		{query: `max_over_time(max_over_time(cpu[1d:10s])[20d:1h])`, reason: "more than 11000 points"},
		{query: `max_over_time(max_over_time(cpu[1d:])[1d:1h])`, reason: "more than 11000 points"},
		{query: `max_over_time(max_over_time(cpu[1d:10s])[1d:1h])`, reason: "more than 11000 points"},
		{query: `max_over_time(max_over_time(cpu[1d:1m])[1d:1h])`},
		{query: `max_over_time(max_over_time(cpu[1h:10s])[2d:1h])`, reason: "more than 11000 points"},
		{query: `max_over_time(max_over_time(cpu[1h:10s])[2d:1h] @ ` + at(0) + `)`, reason: "more than 11000 points"},
		{query: `max_over_time(max_over_time(cpu[1d:10s] @ ` + at(0) + `)[1d:1h])`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			g := NewWithT(t)
			w := tc.window
			if w.start.IsZero() {
				w = testWindow()
			}
			_, err := c.confine(tc.query, testTarget(), w)
			if tc.reason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(fleet.ErrorCodeOf(err)).To(Equal(fleet.CodeMetricsQueryRefused))
			g.Expect(err.Error()).To(ContainSubstring(tc.reason))
			g.Expect(err.Error()).NotTo(ContainSubstring("cpu"), "the refusal quotes the query")
		})
	}
}

func TestConfineWithoutClustersMatchesNothing(t *testing.T) {
	g := NewWithT(t)
	target := testTarget()
	target.Clusters = nil
	out, err := testConfiner().confine(`{__name__=~".+"}`, target, testWindow())
	g.Expect(err).NotTo(HaveOccurred())
	for _, vs := range selectors(g, out) {
		for _, v := range []string{"", "a-1", "b-1", "[^\\s\\S]"} {
			g.Expect(matches(vs, "clusterID", v)).To(BeFalse(), "%s matches %q", vs, v)
		}
	}
}

func TestConfineQuotesClusterValues(t *testing.T) {
	g := NewWithT(t)
	target := testTarget()
	target.Clusters = []string{`a.b`, `x|.*`}
	out, err := testConfiner().confine(`cpu`, target, testWindow())
	g.Expect(err).NotTo(HaveOccurred())
	vs := selectors(g, out)[0]
	g.Expect(matches(vs, "clusterID", "a.b")).To(BeTrue())
	g.Expect(matches(vs, "clusterID", "x|.*")).To(BeTrue())
	g.Expect(matches(vs, "clusterID", "axb")).To(BeFalse())
	g.Expect(matches(vs, "clusterID", "b-1")).To(BeFalse())
}

func TestConfineLetsAdminsReadEveryCluster(t *testing.T) {
	g := NewWithT(t)
	target := testTarget()
	target.All = true
	out, err := testConfiner().confine(`sum by (clusterID) (cpu)`, target, testWindow())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).NotTo(ContainSubstring("a-1"))
	vs := selectors(g, out)[0]
	g.Expect(matches(vs, "clusterID", "b-1")).To(BeTrue())
	_, err = testConfiner().confine(`secret_metric`, target, testWindow())
	g.Expect(fleet.ErrorCodeOf(err)).To(Equal(fleet.CodeMetricsQueryRefused))
}

func TestCheckRangeBounds(t *testing.T) {
	c := testConfiner()
	now := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		start, end time.Time
		step       time.Duration
		reason     string
	}{
		{now, now.Add(-time.Hour), time.Minute, "before start"},
		{now.Add(-25 * time.Hour), now, time.Hour, "spans"},
		{now.Add(-time.Hour), now, time.Second, "finer than"},
		{now.Add(-24 * time.Hour), now, 10 * time.Second, "points"},
	} {
		err := c.checkRange(tc.start, tc.end, tc.step)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.reason)))
	}
	NewWithT(t).Expect(c.checkRange(now.Add(-time.Hour), now, time.Minute)).To(Succeed())
}

func TestAlternationNeverMatchesEmpty(t *testing.T) {
	g := NewWithT(t)
	for _, values := range [][]string{nil, {""}, {"a"}, {"a", ""}} {
		m := labels.MustNewMatcher(labels.MatchRegexp, "x", alternation(values))
		g.Expect(m.Matches("")).To(BeFalse(), "%v", values)
		g.Expect(strings.Contains(alternation(values), "||")).To(BeFalse())
	}
}
