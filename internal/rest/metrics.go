package rest

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPMetrics counts and times API requests by route template, method and
// status code: bounded labels only, never a raw path or an id.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics registers the API request metrics with reg, prefixed with the
// configured service name.
func NewHTTPMetrics(cfg Config, reg prometheus.Registerer) (*HTTPMetrics, error) {
	labels := []string{"route", "method", "code"}
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: cfg.MetricsNamespace(),
			Subsystem: "api",
			Name:      "inbound_requests_total",
			Help:      "API requests by route template, method and status code.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: cfg.MetricsNamespace(),
			Subsystem: "api",
			Name:      "inbound_request_duration_seconds",
			Help:      "API request duration by route template, method and status code.",
			Buckets:   []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *HTTPMetrics) observe(route, method string, status int, elapsed time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(route, method, code).Inc()
	m.duration.WithLabelValues(route, method, code).Observe(elapsed.Seconds())
}
