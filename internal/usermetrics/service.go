package usermetrics

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Store is what the service reads of the inventory.
type Store interface {
	fleet.MetricsStore
}

// Service answers the user-facing metrics endpoints.
type Service struct {
	cfg       Config
	allow     *AllowList
	backend   *backend
	store     Store
	confiner  confiner
	inventory inventoryRenderer
	limits    *rateLimits
	clusters  *clusterCache
	metrics   *Metrics
	logger    *slog.Logger
	now       func() time.Time
}

// Caller is who asks: an identity, and whether it reads every organisation.
type Caller = fleet.MetricsCaller

var _ fleet.UserMetrics = (*Service)(nil)

// New returns the service; namespace prefixes the fleet manager's own series.
func New(cfg Config, store Store, namespace string, metrics *Metrics, logger *slog.Logger) (*Service, error) {
	allow, err := LoadAllowList(cfg.AllowListFile)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(cfg)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, allow: allow, backend: b, store: store, confiner: newConfiner(cfg),
		inventory: inventoryRenderer{prefix: namespace + "_", clusterLabel: cfg.ClusterLabel, source: cfg.ClusterLabelSource},
		limits:    newRateLimits(cfg.Rate, cfg.Burst), clusters: newClusterCache(cfg.ClusterCacheTTL), metrics: metrics, logger: logger.With("component", "user-metrics"), now: time.Now}, nil
}

// Admit counts a request against the caller's organisation's rate limit.
// Errors: CodeRateLimited.
func (s *Service) Admit(c Caller) error {
	if !s.limits.allow(rateKey(c)) {
		s.metrics.limited.Inc()
		return fleet.Errorf(fleet.CodeRateLimited, "the organisation sent more metrics requests than its limit of %g per second (burst %d); retry later",
			s.cfg.Rate, s.cfg.Burst)
	}
	return nil
}

// rateKey is whose budget a request spends: its organisation's, else its
// subject's.
func rateKey(c Caller) string {
	if c.Identity.OrgID != "" {
		return "org:" + c.Identity.OrgID
	}
	return "subject:" + c.Identity.Subject + c.Identity.Username
}

// Result is a query's answer in the Prometheus HTTP API's shape; Data.Result
// is the filtered series of a vector or matrix, or the backend's scalar or
// string as it came.
type Result struct {
	Status   string     `json:"status"`
	Data     ResultData `json:"data"`
	Warnings []string   `json:"warnings,omitempty"`
	Infos    []string   `json:"infos,omitempty"`
}

// ResultData is a result's type and value.
type ResultData struct {
	ResultType string `json:"resultType"`
	Result     any    `json:"result"`
}

// Query runs q, an instant or range query confined to the caller's
// clusters, and answers its JSON.
func (s *Service) Query(ctx context.Context, c Caller, q fleet.MetricsQuery) ([]byte, error) {
	b, err := s.queryBackend()
	if err != nil {
		return nil, err
	}
	if q.Range {
		if err := s.confiner.checkRange(q.Start, q.End, q.Step); err != nil {
			return nil, err
		}
	}
	w := evalWindow{start: q.Start, end: q.End}
	if !q.Range {
		at := q.Time
		if at.IsZero() {
			at = s.now()
		}
		w = instant(at)
	}
	confined, allowed, err := s.confine(ctx, c, q.Query, w)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var ans answer
	if q.Range {
		ans, err = b.queryRange(ctx, confined, q.Start, q.End, q.Step, q.Timeout)
		s.metrics.observe("query_range", start, err)
	} else {
		ans, err = b.query(ctx, confined, w.end, q.Timeout)
		s.metrics.observe("query", start, err)
	}
	if err != nil {
		return nil, err
	}
	res, err := s.result(ans, allowed)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (s *Service) queryBackend() (*backend, error) {
	if s.backend == nil {
		return nil, fleet.Errorf(fleet.CodeNotFound, "this deployment has no metrics backend (--user-metrics-backend-url): only the text endpoints serve the inventory's series")
	}
	return s.backend, nil
}

// confine rewrites query, evaluated over w, for the caller: its allow-list
// and its clusters.
func (s *Service) confine(ctx context.Context, c Caller, query string, w evalWindow) (string, Allowed, error) {
	allowed := s.allow.For(c.Identity.OrgID, c.Admin)
	t := Target{Allowed: allowed, All: c.Admin}
	if !c.Admin {
		values, err := s.orgClusterValues(ctx, c)
		if err != nil {
			return "", allowed, err
		}
		t.Clusters = values
	}
	q, err := s.confiner.confine(query, t, w)
	return q, allowed, err
}

// orgClusterValues are the cluster label's values of the caller's
// organisation's clusters, from the cache while they are fresh.
func (s *Service) orgClusterValues(ctx context.Context, c Caller) ([]string, error) {
	key := rateKey(c)
	if values, ok := s.clusters.get(key); ok {
		return values, nil
	}
	clusters, err := s.store.MetricsClusters(ctx, s.scope(c, ""))
	if err != nil {
		return nil, err
	}
	values := s.values(clusters)
	s.clusters.put(key, values)
	return values, nil
}

func (s *Service) scope(c Caller, registrationID string) fleet.MetricsScope {
	return fleet.MetricsScope{Caller: c.Identity, Admin: c.Admin, RegistrationID: registrationID, Limit: s.cfg.MaxClusters,
		ClusterLabelSource: s.cfg.ClusterLabelSource}
}

// values are the clusters' label values; a value the store marked as
// claimed by another organisation's cluster too is left out, so a cluster
// that copies another's identity reads neither's series.
func (s *Service) values(clusters []fleet.MetricsCluster) []string {
	out := make([]string, 0, len(clusters))
	for _, cl := range clusters {
		v := s.inventory.clusterValue(cl)
		if v == "" {
			continue
		}
		if cl.SharedIdentity {
			s.metrics.ambiguous.Inc()
			continue
		}
		out = append(out, v)
	}
	return out
}

// result filters the answer's labels to the allow-list; a scalar or string
// goes as it came.
func (s *Service) result(ans answer, allowed Allowed) (Result, error) {
	res := Result{Status: "success", Data: ResultData{ResultType: ans.Data.ResultType, Result: ans.Data.Result},
		Warnings: ans.Warnings, Infos: ans.Infos}
	if ans.Data.ResultType != "vector" && ans.Data.ResultType != "matrix" {
		return res, nil
	}
	var all []series
	if err := json.Unmarshal(ans.Data.Result, &all); err != nil {
		return Result{}, wrap(fleet.CodeUnavailable, err, "the metrics backend answered a %s that is not the query API's; retry later", ans.Data.ResultType)
	}
	keep := func(name string) bool {
		return name == model.MetricNameLabel || name == s.cfg.ClusterLabel || allowed.Labels[name]
	}
	res.Data.Result = filterSeries(all, keep)
	return res, nil
}

// filterSeries keeps the labels keep allows on each series, and the first of
// series that become the same.
func filterSeries(all []series, keep func(string) bool) []series {
	seen := map[string]bool{}
	out := make([]series, 0, len(all))
	for _, s := range all {
		for k := range s.Metric {
			if !keep(k) {
				delete(s.Metric, k)
			}
		}
		if key := labelKey(s.Metric); !seen[key] {
			seen[key] = true
			out = append(out, s)
		}
	}
	return out
}

// labelKey identifies a label set: its pairs in name order.
func labelKey(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}

// WriteText writes the caller's clusters' metrics (one registration's, when
// registrationID is set) in the Prometheus text format: the allow-listed
// backend series at this moment, and the fleet manager's own.
func (s *Service) WriteText(ctx context.Context, c Caller, registrationID string, w io.Writer) error {
	inv, err := s.store.MetricsInventory(ctx, s.scope(c, registrationID))
	if err != nil {
		return err
	}
	allowed := s.allow.For(c.Identity.OrgID, c.Admin)
	fams := newFamilies()
	if s.backend != nil && len(allowed.Metrics) > 0 {
		if err := s.addBackendSeries(ctx, fams, c, registrationID, inv.Clusters, allowed); err != nil {
			return err
		}
	}
	s.inventory.render(fams, inv, allowed.Inventory)
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range fams.sorted() {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

// addBackendSeries reads the latest sample of every allowed metric of the
// clusters, selected on the parsed form so no value is spliced into text.
func (s *Service) addBackendSeries(ctx context.Context, fams *families, c Caller, registrationID string, clusters []fleet.MetricsCluster, allowed Allowed) error {
	matchers := []*labels.Matcher{nameMatcher(allowed.Metrics)}
	if !c.Admin || registrationID != "" {
		values := s.values(clusters)
		if len(values) == 0 {
			return nil
		}
		matchers = append(matchers, s.confiner.clusterMatcher(values))
	}
	q := (&parser.VectorSelector{LabelMatchers: matchers}).String()
	start := time.Now()
	ans, err := s.backend.query(ctx, q, s.now(), 0)
	s.metrics.observe("text", start, err)
	if err != nil {
		return err
	}
	if ans.Data.ResultType != "vector" {
		return nil
	}
	var vec []series
	if err := json.Unmarshal(ans.Data.Result, &vec); err != nil {
		return wrap(fleet.CodeUnavailable, err, "the metrics backend answered a vector that is not the query API's; retry later")
	}
	keys := make([]string, len(vec))
	order := make([]int, len(vec))
	for i := range vec {
		keys[i], order[i] = labelKey(vec[i].Metric), i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	for _, i := range order {
		smp := vec[i]
		name := smp.Metric[model.MetricNameLabel]
		if smp.Histogram != nil || !allowed.Metrics[name] {
			continue
		}
		value, ok := sampleValue(smp.Value)
		if !ok {
			continue
		}
		var lbls []*dto.LabelPair
		for k, v := range smp.Metric {
			if k != model.MetricNameLabel && (k == s.cfg.ClusterLabel || allowed.Labels[k]) {
				lbls = append(lbls, pair(k, v))
			}
		}
		fams.add(name, "", dto.MetricType_UNTYPED, lbls, value)
	}
	return nil
}

// sampleValue reads a sample's value, `[<time>, "<value>"]`.
func sampleValue(raw json.RawMessage) (float64, bool) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return 0, false
	}
	var text string
	if err := json.Unmarshal(pair[1], &text); err != nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(text, 64)
	return v, err == nil
}
