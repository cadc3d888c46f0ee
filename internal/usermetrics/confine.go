package usermetrics

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus-community/prom-label-proxy/injectproxy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Target is whose series, and which metric names and labels, a query may
// read.
type Target struct {
	Allowed Allowed
	// All reads every cluster's series (admins); else only those whose
	// cluster label is one of Clusters.
	All      bool
	Clusters []string
}

// confiner rewrites PromQL queries so that they read only a target's series:
// every selector gets the target's cluster matcher (prom-label-proxy's
// injectproxy, on the parsed query), and those that do not name their metric
// get the allow-list's names; metric names, labels, ranges and resolutions
// off the allow-list or past the bounds are refused.
type confiner struct {
	clusterLabel string
	maxRange     time.Duration
	minStep      time.Duration
	maxPoints    int
}

func newConfiner(cfg Config) confiner {
	return confiner{clusterLabel: cfg.ClusterLabel, maxRange: cfg.MaxRange, minStep: cfg.MinStep, maxPoints: cfg.MaxPoints}
}

// refused is the error of a query the proxy does not forward.
func refused(format string, args ...any) error {
	return fleet.Errorf(fleet.CodeMetricsQueryRefused, format, args...)
}

// evalWindow is when a query is evaluated: an instant query's time as both
// start and end, or a range query's start and end.
type evalWindow struct {
	start, end time.Time
}

// instant is the window of an instant query evaluated at at.
func instant(at time.Time) evalWindow {
	return evalWindow{start: at, end: at}
}

// confine parses query, checks it against t and the bounds (its reach from
// the window w it is evaluated over), and returns it rewritten to read only
// t's series.
func (c confiner) confine(query string, t Target, w evalWindow) (string, error) {
	expr, err := parser.ParseExpr(query)
	if err != nil {
		return "", refused("the query does not parse: %s", parseReason(err))
	}
	var inject []*parser.VectorSelector
	err = parser.Walk(visitFunc(func(node parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			named, err := c.checkSelector(n, t.Allowed)
			if err != nil {
				return err
			}
			if !named {
				inject = append(inject, n)
			}
			return c.checkOffset(n.OriginalOffset)
		case *parser.MatrixSelector:
			if n.Range > c.maxRange {
				return refused("a range selector spans %s; at most %s (--user-metrics-max-range)", n.Range, c.maxRange)
			}
		case *parser.SubqueryExpr:
			return c.checkSubquery(n)
		case *parser.AggregateExpr:
			return c.checkAggregate(n, t.Allowed)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				return c.checkLabels(t.Allowed, "on/ignoring/group_left/group_right", slices.Concat(n.VectorMatching.MatchingLabels, n.VectorMatching.Include))
			}
		case *parser.Call:
			return c.checkCall(n, t.Allowed)
		}
		return nil
	}), expr, nil)
	if err != nil {
		return "", err
	}
	if err := c.checkReach(expr, reach{from: w.start, to: w.end}, w); err != nil {
		return "", err
	}
	if len(inject) > 0 {
		names := nameMatcher(t.Allowed.Metrics)
		for _, vs := range inject {
			vs.LabelMatchers = append(vs.LabelMatchers, names)
		}
	}
	if !t.All {
		if err := enforce(expr, c.clusterMatcher(t.Clusters)); err != nil {
			return "", err
		}
	}
	return expr.String(), nil
}

// parseReason is the parser's message without the query it quotes back.
func parseReason(err error) string {
	var perrs parser.ParseErrors
	if errors.As(err, &perrs) && len(perrs) > 0 {
		return perrs[0].Err.Error()
	}
	return "not PromQL"
}

// enforce adds m to every selector of expr. injectproxy panics on a node
// type it does not know (a parser newer than it): that is a refusal, never
// a query forwarded without the matcher.
func enforce(expr parser.Expr, m *labels.Matcher) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = refused("the query uses a construct the proxy cannot confine")
		}
	}()
	if err := injectproxy.NewPromQLEnforcer(false, m).EnforceNode(expr); err != nil {
		return refused("the query cannot be confined to the organisation's clusters")
	}
	return nil
}

// clusterMatcher matches exactly the given cluster label values: never the
// empty value (series without the label), and nothing at all when there is
// no value.
func (c confiner) clusterMatcher(values []string) *labels.Matcher {
	return labels.MustNewMatcher(labels.MatchRegexp, c.clusterLabel, alternation(values))
}

// nameMatcher matches exactly the allowed metric names.
func nameMatcher(names map[string]bool) *labels.Matcher {
	return labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, alternation(slices.Collect(maps.Keys(names))))
}

// alternation is a regular expression matching exactly the non-empty values;
// `[^\s\S]` matches no character, so with no value it matches nothing, not
// even the empty string.
func alternation(values []string) string {
	quoted := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" {
			quoted = append(quoted, regexp.QuoteMeta(v))
		}
	}
	if len(quoted) == 0 {
		return `[^\s\S]`
	}
	slices.Sort(quoted)
	return strings.Join(slices.Compact(quoted), "|")
}

// checkSelector checks a selector's metric name and label matchers; named
// reports that it names its metric (by name, or a __name__ equality).
func (c confiner) checkSelector(vs *parser.VectorSelector, allowed Allowed) (named bool, err error) {
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName {
			if m.Type == labels.MatchEqual {
				if !allowed.Metrics[m.Value] {
					return false, refused("metric %q is not on the allow-list of user-facing metrics", m.Value)
				}
				named = true
			}
			continue
		}
		if err := c.checkLabels(allowed, "a label matcher", []string{m.Name}); err != nil {
			return false, err
		}
	}
	if vs.Name != "" && !allowed.Metrics[vs.Name] {
		return false, refused("metric %q is not on the allow-list of user-facing metrics", vs.Name)
	}
	return named || vs.Name != "", nil
}

// checkLabels refuses labels off the allow-list (the cluster label and the
// metric name are always readable).
func (c confiner) checkLabels(allowed Allowed, where string, names []string) error {
	for _, l := range names {
		if l != c.clusterLabel && l != labels.MetricName && !allowed.Labels[l] {
			return refused("%s names label %q, which is not on the allow-list of user-facing labels", where, l)
		}
	}
	return nil
}

// checkWritten refuses a label a function writes unless it is on the
// allow-list: never the cluster label or the metric name, so an answer's
// cluster label is always the one its series carried.
func (c confiner) checkWritten(allowed Allowed, fn, l string) error {
	if l == c.clusterLabel || l == labels.MetricName || !allowed.Labels[l] {
		return refused("%s writes label %q; it may write only labels of the allow-list, not the cluster label", fn, l)
	}
	return nil
}

func (c confiner) checkOffset(offset time.Duration) error {
	if offset > c.maxRange || offset < -c.maxRange {
		return refused("an offset of %s reaches past %s (--user-metrics-max-range)", offset, c.maxRange)
	}
	return nil
}

func (c confiner) checkSubquery(sq *parser.SubqueryExpr) error {
	if sq.Range > c.maxRange {
		return refused("a subquery spans %s; at most %s (--user-metrics-max-range)", sq.Range, c.maxRange)
	}
	if sq.Step != 0 && sq.Step < c.minStep {
		return refused("a subquery's resolution %s is finer than %s (--user-metrics-min-step)", sq.Step, c.minStep)
	}
	step := max(sq.Step, c.minStep)
	if sq.Step == 0 && sq.Range/c.minStep > time.Duration(c.maxPoints) {
		return refused("a subquery of %s needs an explicit resolution: at most %d points (--user-metrics-max-points)", sq.Range, c.maxPoints)
	}
	if sq.Range/step > time.Duration(c.maxPoints) {
		return refused("a subquery of %s at %s has more than %d points (--user-metrics-max-points)", sq.Range, step, c.maxPoints)
	}
	return c.checkOffset(sq.OriginalOffset)
}

// reach is where a part of a query is evaluated, for the path from the root
// down to it: from and to are the first and last times (the window's at the
// root; one instant under an @ modifier), width how long a stretch the
// enclosing subqueries make it cover for one evaluation of the query (their
// ranges added up since the last @), and points how many steps those
// subqueries evaluate for one evaluation of the query.
type reach struct {
	from, to time.Time
	width    time.Duration
	points   int64
}

// checkReach bounds the whole query, path by path, where checkSubquery and
// checkOffset bound each construct alone: a selector under nested
// subqueries and offsets reads back (or ahead) as far as their ranges and
// offsets add up to, and an @ modifier moves it to a time of the caller's
// choosing, so every read must stay within --user-metrics-max-range of the
// window. Each subquery is evaluated over the stretch its enclosing
// subqueries cover, at its own resolution: its steps, summed along the
// path, stay within --user-metrics-max-points, what one subquery alone may
// evaluate.
func (c confiner) checkReach(node parser.Node, r reach, w evalWindow) error {
	switch n := node.(type) {
	case *parser.VectorSelector:
		r = r.at(n.Timestamp, n.StartOrEnd, w).shift(n.OriginalOffset)
		return c.checkRead(r.from, r.to, w)
	case *parser.MatrixSelector:
		if vs, ok := n.VectorSelector.(*parser.VectorSelector); ok {
			r = r.at(vs.Timestamp, vs.StartOrEnd, w).shift(vs.OriginalOffset)
		}
		return c.checkRead(r.from.Add(-n.Range), r.to, w)
	case *parser.SubqueryExpr:
		r = r.at(n.Timestamp, n.StartOrEnd, w).shift(n.OriginalOffset)
		r.from = r.from.Add(-n.Range)
		if err := c.checkRead(r.from, r.to, w); err != nil {
			return err
		}
		r.width += n.Range
		r.points += int64(r.width / max(n.Step, c.minStep))
		if r.points > int64(c.maxPoints) {
			return refused("nested subqueries evaluate more than %d points for one evaluation of the query (--user-metrics-max-points): "+
				"an inner subquery covers the ranges of those around it at its own resolution, and the points of a nesting add up", c.maxPoints)
		}
		return c.checkReach(n.Expr, r, w)
	}
	for _, child := range parser.Children(node) {
		if err := c.checkReach(child, r, w); err != nil {
			return err
		}
	}
	return nil
}

// at applies an @ modifier: the part is evaluated at one time, whatever the
// times around it.
func (r reach) at(ts *int64, startOrEnd parser.ItemType, w evalWindow) reach {
	var t time.Time
	switch {
	case ts != nil:
		t = time.UnixMilli(*ts)
	case startOrEnd == parser.START:
		t = w.start
	case startOrEnd == parser.END:
		t = w.end
	default:
		return r
	}
	r.from, r.to, r.width = t, t, 0
	return r
}

// shift applies an offset: the part is evaluated that much earlier (later,
// when negative).
func (r reach) shift(offset time.Duration) reach {
	r.from, r.to = r.from.Add(-offset), r.to.Add(-offset)
	return r
}

// checkRead refuses a read of from..to that reaches past
// --user-metrics-max-range before the window's start or after its end.
func (c confiner) checkRead(from, to time.Time, w evalWindow) error {
	if from.Before(w.start.Add(-c.maxRange)) {
		return refused("the query reads further back than %s (--user-metrics-max-range) from when it is evaluated: "+
			"the ranges, subquery ranges and offsets of a nesting add up, and an @ modifier counts from the query's time", c.maxRange)
	}
	if to.After(w.end.Add(c.maxRange)) {
		return refused("the query reads further ahead than %s (--user-metrics-max-range) of when it is evaluated: "+
			"the negative offsets of a nesting add up, and an @ modifier counts from the query's time", c.maxRange)
	}
	return nil
}

func (c confiner) checkAggregate(a *parser.AggregateExpr, allowed Allowed) error {
	if err := c.checkLabels(allowed, a.Op.String()+" by/without", a.Grouping); err != nil {
		return err
	}
	if a.Op == parser.COUNT_VALUES {
		if s, ok := a.Param.(*parser.StringLiteral); ok {
			return c.checkWritten(allowed, "count_values", s.Val)
		}
		return refused("count_values needs a literal label name")
	}
	return nil
}

// checkCall checks the labels functions read and write; label arguments must
// be literals, so what they name is known before the query runs.
func (c confiner) checkCall(call *parser.Call, allowed Allowed) error {
	literal := func(i int) (string, error) {
		if i >= len(call.Args) {
			return "", nil
		}
		s, ok := unwrapString(call.Args[i])
		if !ok {
			return "", refused("%s needs literal label names", call.Func.Name)
		}
		return s, nil
	}
	switch call.Func.Name {
	case "label_replace":
		dst, err := literal(1)
		if err != nil {
			return err
		}
		src, err := literal(3)
		if err != nil {
			return err
		}
		if err := c.checkWritten(allowed, "label_replace", dst); err != nil {
			return err
		}
		return c.checkLabels(allowed, "label_replace", []string{src})
	case "label_join":
		dst, err := literal(1)
		if err != nil {
			return err
		}
		if err := c.checkWritten(allowed, "label_join", dst); err != nil {
			return err
		}
		for i := 3; i < len(call.Args); i++ {
			src, err := literal(i)
			if err != nil {
				return err
			}
			if err := c.checkLabels(allowed, "label_join", []string{src}); err != nil {
				return err
			}
		}
	case "sort_by_label", "sort_by_label_desc":
		for i := 1; i < len(call.Args); i++ {
			l, err := literal(i)
			if err != nil {
				return err
			}
			if err := c.checkLabels(allowed, call.Func.Name, []string{l}); err != nil {
				return err
			}
		}
	case "info":
		// info() reads target_info series its argument does not select.
		return refused("info() is not supported: it reads series no selector of the query names")
	}
	return nil
}

func unwrapString(e parser.Expr) (string, bool) {
	switch n := e.(type) {
	case *parser.StringLiteral:
		return n.Val, true
	case *parser.ParenExpr:
		return unwrapString(n.Expr)
	}
	return "", false
}

// checkRange checks a range query's span and resolution.
func (c confiner) checkRange(start, end time.Time, step time.Duration) error {
	switch span := end.Sub(start); {
	case span < 0:
		return refused("end is before start")
	case span > c.maxRange:
		return refused("the range spans %s; at most %s (--user-metrics-max-range)", span.Round(time.Second), c.maxRange)
	case step < c.minStep:
		return refused("step %s is finer than %s (--user-metrics-min-step)", step, c.minStep)
	case span/step >= time.Duration(c.maxPoints):
		return refused("the range at step %s has more than %d points (--user-metrics-max-points)", step, c.maxPoints)
	}
	return nil
}

// visitFunc visits every node of a query, stopping at its first error.
type visitFunc func(parser.Node) error

func (f visitFunc) Visit(node parser.Node, _ []parser.Node) (parser.Visitor, error) {
	if node == nil {
		return nil, nil
	}
	if err := f(node); err != nil {
		return nil, err
	}
	return f, nil
}
