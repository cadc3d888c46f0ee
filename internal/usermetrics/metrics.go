package usermetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Metrics are the proxy's own metrics, on the fleet manager's metrics
// endpoint (docs/operations.md).
type Metrics struct {
	backend   *prometheus.HistogramVec
	limited   prometheus.Counter
	ambiguous prometheus.Counter
}

// NewMetrics registers the proxy's metrics under namespace.
func NewMetrics(namespace string, reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		backend: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "user_metrics", Name: "backend_request_duration_seconds",
			Help:    "Time of the metrics backend's answers, by endpoint (query, query_range, text) and outcome (ok, refused, unavailable).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 13),
		}, []string{"endpoint", "outcome"}),
		limited: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "user_metrics", Name: "rate_limited_total",
			Help: "Metrics requests refused by an organisation's rate limit.",
		}),
		ambiguous: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "user_metrics", Name: "shared_identity_clusters_total",
			Help: "Clusters left out of a metrics read because a cluster of another organisation carries the same identity.",
		}),
	}
	for _, c := range []prometheus.Collector{m.backend, m.limited, m.ambiguous} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(endpoint string, start time.Time, err error) {
	outcome := "ok"
	switch {
	case err == nil:
	case fleet.ErrorCodeOf(err) == fleet.CodeUnavailable:
		outcome = "unavailable"
	default:
		outcome = "refused"
	}
	m.backend.WithLabelValues(endpoint, outcome).Observe(time.Since(start).Seconds())
}
