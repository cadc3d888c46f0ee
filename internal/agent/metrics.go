package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsNamespace prefixes every metric of the agent.
const metricsNamespace = "fleetshard_sync"

// Outcomes, the values of the outcome labels.
const (
	outcomeSuccess  = "success"
	outcomeError    = "error"
	outcomeRejected = "rejected" // refused as malformed: not retried
)

// Metrics are the agent's metrics: bounded labels only, never an id or a name.
type Metrics struct {
	applies          *prometheus.CounterVec
	applyDuration    prometheus.Histogram
	desiredObjects   prometheus.Gauge
	appliedRevision  prometheus.Gauge
	desiredRevision  prometheus.Gauge
	polls            *prometheus.CounterVec
	failedEntries    prometheus.Gauge
	inventoryBatches *prometheus.CounterVec
	resourceBatches  *prometheus.CounterVec
	statusBatches    *prometheus.CounterVec
	heartbeats       *prometheus.CounterVec
	leader           prometheus.Gauge
}

// NewMetrics registers the agent's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "applies_total",
			Help: "Passes applying a desired set to the hub, by outcome.",
		}, []string{"outcome"}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "apply_duration_seconds",
			Help:    "Duration of one pass applying a desired set, removals included.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}),
		desiredObjects: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "objects",
			Help: "Objects in the last desired set received.",
		}),
		appliedRevision: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "applied_revision",
			Help: "Revision of the last desired set acknowledged (entries that failed alone included).",
		}),
		desiredRevision: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "revision",
			Help: "Revision of the hub's desired set as the fleet manager last announced it (a heartbeat's answer or a desired set received).",
		}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "polls_total",
			Help: "Long-polls for the hub's desired set, by outcome (success: a set or nothing new).",
		}, []string{"outcome"}),
		failedEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: "desired", Name: "failed_entries",
			Help: "Registrations and policies of the acknowledged desired set that the hub did not take, each failed alone.",
		}),
		inventoryBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "inventory", Name: "batches_total",
			Help: "Inventory batches sent to the fleet manager, by kind (full, incremental) and outcome.",
		}, []string{"kind", "outcome"}),
		resourceBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "resources", Name: "batches_total",
			Help: "Batches of the synced kinds (the registry's, a bounded set) sent to the fleet manager, by resource, kind of batch (full, incremental) and outcome.",
		}, []string{"resource", "kind", "outcome"}),
		statusBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "registration_status", Name: "batches_total",
			Help: "Registration status batches sent to the fleet manager, by outcome.",
		}, []string{"outcome"}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "heartbeats_total",
			Help: "Hub status reports (heartbeats) sent, by outcome.",
		}, []string{"outcome"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "leader",
			Help: "1 while this agent holds the hub's lease and acts on the hub, 0 while it waits for it.",
		}),
	}
	for _, c := range []prometheus.Collector{m.applies, m.applyDuration, m.desiredObjects, m.appliedRevision, m.desiredRevision, m.polls, m.failedEntries, m.inventoryBatches, m.resourceBatches, m.statusBatches, m.heartbeats, m.leader} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeApply(err error, elapsed time.Duration) {
	m.applies.WithLabelValues(outcome(err)).Inc()
	m.applyDuration.Observe(elapsed.Seconds())
}

func outcome(err error) string {
	switch {
	case err == nil:
		return outcomeSuccess
	case permanent(err):
		return outcomeRejected
	}
	return outcomeError
}
