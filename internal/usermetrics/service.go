package usermetrics

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
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

// QueryParams are an instant query's parameters.
type QueryParams struct {
	Query   string
	Time    time.Time
	Timeout time.Duration
}

// RangeParams are a range query's parameters.
type RangeParams struct {
	Query      string
	Start, End time.Time
	Step       time.Duration
	Timeout    time.Duration
}

// Result is a query's answer in the Prometheus HTTP API's shape.
type Result struct {
	Status   string     `json:"status"`
	Data     ResultData `json:"data"`
	Warnings []string   `json:"warnings,omitempty"`
	Infos    []string   `json:"infos,omitempty"`
}

// ResultData is a result's type and value.
type ResultData struct {
	ResultType model.ValueType `json:"resultType"`
	Result     model.Value     `json:"result"`
}

// Query runs q, an instant or range query, and answers its JSON.
func (s *Service) Query(ctx context.Context, c Caller, q fleet.MetricsQuery) ([]byte, error) {
	var res Result
	var err error
	if q.Range {
		res, err = s.QueryRange(ctx, c, RangeParams{Query: q.Query, Start: q.Start, End: q.End, Step: q.Step, Timeout: q.Timeout})
	} else {
		res, err = s.QueryInstant(ctx, c, QueryParams{Query: q.Query, Time: q.Time, Timeout: q.Timeout})
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// QueryInstant runs an instant query confined to the caller's clusters.
func (s *Service) QueryInstant(ctx context.Context, c Caller, p QueryParams) (Result, error) {
	b, err := s.queryBackend()
	if err != nil {
		return Result{}, err
	}
	q, allowed, err := s.confine(ctx, c, p.Query)
	if err != nil {
		return Result{}, err
	}
	at := p.Time
	if at.IsZero() {
		at = s.now()
	}
	start := time.Now()
	ans, err := b.query(ctx, q, at, p.Timeout)
	s.metrics.observe("query", start, err)
	if err != nil {
		return Result{}, err
	}
	return s.result(ans, allowed), nil
}

// QueryRange runs a range query confined to the caller's clusters.
func (s *Service) QueryRange(ctx context.Context, c Caller, p RangeParams) (Result, error) {
	b, err := s.queryBackend()
	if err != nil {
		return Result{}, err
	}
	if err := s.confiner.checkRange(p.Start, p.End, p.Step); err != nil {
		return Result{}, err
	}
	q, allowed, err := s.confine(ctx, c, p.Query)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	ans, err := b.queryRange(ctx, q, promv1.Range{Start: p.Start, End: p.End, Step: p.Step}, p.Timeout)
	s.metrics.observe("query_range", start, err)
	if err != nil {
		return Result{}, err
	}
	return s.result(ans, allowed), nil
}

func (s *Service) queryBackend() (*backend, error) {
	if s.backend == nil {
		return nil, fleet.Errorf(fleet.CodeNotFound, "this deployment has no metrics backend (--user-metrics-backend-url): only the text endpoints serve the inventory's series")
	}
	return s.backend, nil
}

// confine rewrites query for the caller: its allow-list and its clusters.
func (s *Service) confine(ctx context.Context, c Caller, query string) (string, Allowed, error) {
	allowed := s.allow.For(c.Identity.OrgID, c.Admin)
	t := Target{Allowed: allowed, All: c.Admin}
	if !c.Admin {
		values, err := s.orgClusterValues(ctx, c)
		if err != nil {
			return "", allowed, err
		}
		t.Clusters = values
	}
	q, err := s.confiner.confine(query, t)
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

// result filters the answer's labels to the allow-list.
func (s *Service) result(ans answer, allowed Allowed) Result {
	keep := func(name model.LabelName) bool {
		return name == model.MetricNameLabel || string(name) == s.cfg.ClusterLabel || allowed.Labels[string(name)]
	}
	switch v := ans.Value.(type) {
	case model.Vector:
		ans.Value = model.Vector(filterSeries(v, func(s *model.Sample) *model.Metric { return &s.Metric }, keep))
	case model.Matrix:
		ans.Value = model.Matrix(filterSeries(v, func(s *model.SampleStream) *model.Metric { return &s.Metric }, keep))
	}
	return Result{Status: "success", Data: ResultData{ResultType: ans.Value.Type(), Result: ans.Value}, Warnings: ans.Warnings, Infos: ans.Infos}
}

// filterSeries keeps the labels keep allows on each series, and the first of
// series that become the same.
func filterSeries[T any](series []T, metric func(T) *model.Metric, keep func(model.LabelName) bool) []T {
	seen := map[model.Fingerprint]bool{}
	out := make([]T, 0, len(series))
	for _, s := range series {
		m := metric(s)
		*m = filterMetric(*m, keep)
		if fp := m.Fingerprint(); !seen[fp] {
			seen[fp] = true
			out = append(out, s)
		}
	}
	return out
}

func filterMetric(m model.Metric, keep func(model.LabelName) bool) model.Metric {
	out := make(model.Metric, len(m))
	for k, v := range m {
		if keep(k) {
			out[k] = v
		}
	}
	return out
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
	vec, ok := ans.Value.(model.Vector)
	if !ok {
		return nil
	}
	keep := func(name model.LabelName) bool {
		return string(name) == s.cfg.ClusterLabel || allowed.Labels[string(name)]
	}
	slices.SortFunc(vec, func(a, b *model.Sample) int {
		if a.Metric.Before(b.Metric) {
			return -1
		}
		if b.Metric.Before(a.Metric) {
			return 1
		}
		return 0
	})
	for _, smp := range vec {
		name := string(smp.Metric[model.MetricNameLabel])
		if smp.Histogram != nil || !allowed.Metrics[name] {
			continue
		}
		var lbls []*dto.LabelPair
		for k, v := range smp.Metric {
			if k != model.MetricNameLabel && keep(k) {
				lbls = append(lbls, pair(string(k), string(v)))
			}
		}
		fams.add(name, "", dto.MetricType_UNTYPED, lbls, float64(smp.Value))
	}
	return nil
}
