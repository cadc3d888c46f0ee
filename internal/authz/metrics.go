package authz

import (
	"bytes"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Metrics count and time the decisions.
type Metrics struct {
	decisions *prometheus.CounterVec
	duration  prometheus.Histogram
	cached    prometheus.Counter
}

func newMetrics(namespace string) *Metrics {
	return &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "authz_decisions_total",
			Help: "Authorization decisions by action and result (allow, deny, error)."}, []string{"action", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "authz_decision_duration_seconds",
			Help:    "Time to evaluate the authorization policy for one decision.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 4, 8)}),
		cached: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "authz_decisions_cached_total",
			Help: "Authorization decisions answered from the decision cache, without evaluating the policy."}),
	}
}

// NewMetrics returns the decision metrics, prefixed with namespace (the
// service's, e.g. fleet_manager) and registered with reg.
func NewMetrics(namespace string, reg prometheus.Registerer) (*Metrics, error) {
	m := newMetrics(namespace)
	for _, c := range []prometheus.Collector{m.decisions, m.duration, m.cached} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records one decision; actions are the code's constants, a
// bounded set.
func (m *Metrics) observe(action string, err error, took time.Duration, cached bool) {
	result := "allow"
	switch {
	case err == nil:
	case fleet.ErrorCodeOf(err) == fleet.CodeInternal:
		result = "error"
	default:
		result = "deny"
	}
	m.decisions.WithLabelValues(action, result).Inc()
	m.duration.Observe(took.Seconds())
	if cached {
		m.cached.Inc()
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
