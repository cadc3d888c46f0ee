package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Metrics are the reconcilers' metrics: bounded labels only, never an id.
type Metrics struct {
	duration   *prometheus.HistogramVec
	queueDepth *prometheus.GaugeVec
	phases     *prometheus.GaugeVec
	hubs       *prometheus.GaugeVec
	// purged counts the tombstones the purge deleted, by table.
	purged *prometheus.CounterVec
	// poolActions counts pool_mgr's scaling decisions, by type and reason.
	poolActions *prometheus.CounterVec
	// dnsChanges counts dns_mgr's record changes, by provider and result.
	dnsChanges *prometheus.CounterVec
}

// Pass outcomes, the values of the outcome label.
const (
	outcomeDone     = "done"
	outcomeRequeued = "requeued"
	outcomeError    = "error"
	outcomeLost     = "claim_lost"
)

// NewMetrics registers the reconcilers' metrics with reg under namespace.
func NewMetrics(namespace string, reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "reconcile", Name: "duration_seconds",
			Help:    "Duration of one reconcile of one object (of a batch reconciled at once, its share of the batch's time), by reconciler and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"reconciler", "outcome"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "reconcile", Name: "queue_depth",
			Help: "Registrations due for work, by queue.",
		}, []string{"queue"}),
		phases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "registrations",
			Help: "Live registrations by phase.",
		}, []string{"phase"}),
		hubs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "hubs",
			Help: "Live hubs by condition type and status.",
		}, []string{"condition", "status"}),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "inventory", Name: "tombstones_purged_total",
			Help: "Inventory tombstones deleted after the retention, by table.",
		}, []string{"table"}),
		poolActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "pool", Name: "scale_actions_total",
			Help: "Decisions pool_mgr's scaler carried out (cluster added or removed, nodes scaled, version or add-ons applied), by type and reason.",
		}, []string{"type", "reason"}),
		dnsChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "dns", Name: "record_changes_total",
			Help: "Record changes dns_mgr sent to DNS providers, by provider and result (published, removed, refused, owned_elsewhere, unavailable).",
		}, []string{"provider", "result"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.queueDepth, m.phases, m.hubs, m.purged, m.poolActions, m.dnsChanges} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) setStats(stats fleet.FleetStats) {
	for _, kind := range []fleet.WorkKind{fleet.WorkProvision, fleet.WorkDeprovision} {
		m.queueDepth.WithLabelValues(string(kind)).Set(float64(stats.QueueDepth[kind]))
	}
	for _, phase := range fleet.Phases() {
		m.phases.WithLabelValues(string(phase)).Set(float64(stats.Phases[phase]))
	}
}

func (m *Metrics) setHubs(counts map[fleet.ConditionStatus]int) {
	for _, s := range []fleet.ConditionStatus{fleet.ConditionTrue, fleet.ConditionFalse, fleet.ConditionUnknown} {
		m.hubs.WithLabelValues(fleet.ConditionHubReady, string(s)).Set(float64(counts[s]))
	}
}
