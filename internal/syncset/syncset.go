// Package syncset holds what the two SyncSet delivery modes share: where they
// read the sealed material from, how an API answer becomes a delivery report,
// and their metrics. The modes are OCMDelivery (ocm.go) and HiveDelivery
// (hive.go) (ARCHITECTURE.md section 6).
package syncset

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Source gives a SyncSet delivery what the store keeps sealed.
type Source interface {
	// HubCredentials opens a hub's write-only credentials (nil when none).
	HubCredentials(ctx context.Context, hubID string) (map[string]string, error)
	// RegistrationObjects renders a registration's hub-side objects for hubID,
	// with its import credentials opened: what the agent would apply.
	RegistrationObjects(ctx context.Context, hubID string, reg fleet.Registration) ([]map[string]any, error)
}

// Operations, the values of the operation label.
const (
	OpGet    = "get"
	OpCreate = "create"
	OpUpdate = "update"
	OpApply  = "apply"
	OpDelete = "delete"
	OpToken  = "token"
)

// Outcomes, the values of the outcome label.
const (
	OutcomeSuccess     = "success"
	OutcomeNotFound    = "not_found"
	OutcomeConflict    = "conflict"
	OutcomeClientError = "client_error"
	OutcomeServerError = "server_error"
	OutcomeUnreachable = "unreachable"
)

// Metrics count SyncSet API calls and time applies: bounded labels only.
type Metrics struct {
	calls   *prometheus.CounterVec
	applies *prometheus.HistogramVec
}

// NewMetrics registers the SyncSet metrics with reg under namespace.
func NewMetrics(namespace string, reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "syncset", Name: "api_calls_total",
			Help: "SyncSet API calls, by delivery mode, operation and outcome.",
		}, []string{"mode", "operation", "outcome"}),
		applies: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "syncset", Name: "apply_duration_seconds",
			Help:    "Time to make a registration's SyncSet current (every call of one Deliver), by delivery mode and outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"mode", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.applies} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("syncset.NewMetrics: %w", err)
		}
	}
	return m, nil
}

// Call counts one API call.
func (m *Metrics) Call(mode fleet.DeliveryMode, op, outcome string) {
	if m != nil {
		m.calls.WithLabelValues(string(mode), op, outcome).Inc()
	}
}

// Applied times one Deliver from start; err is its error.
func (m *Metrics) Applied(mode fleet.DeliveryMode, start time.Time, err error) {
	if m == nil {
		return
	}
	outcome := OutcomeSuccess
	if err != nil {
		outcome = "error"
	}
	m.applies.WithLabelValues(string(mode), outcome).Observe(time.Since(start).Seconds())
}

// OutcomeOf names the outcome of an answer with status (0 when none came).
func OutcomeOf(status int) string {
	switch {
	case status == 0:
		return OutcomeUnreachable
	case status == http.StatusNotFound:
		return OutcomeNotFound
	case status == http.StatusConflict:
		return OutcomeConflict
	case status >= 500:
		return OutcomeServerError
	case status >= 400:
		return OutcomeClientError
	default:
		return OutcomeSuccess
	}
}

// APIError is a failed SyncSet API call.
type APIError struct {
	Mode   fleet.DeliveryMode
	Op     string
	Status int    // 0 when no answer came (timeout, network)
	Reason string // the API's own words
	Err    error
}

func (e *APIError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s SyncSet %s: %v", e.Mode, e.Op, e.Err)
	}
	return fmt.Sprintf("%s SyncSet %s: HTTP %d: %s", e.Mode, e.Op, e.Status, e.Reason)
}

func (e *APIError) Unwrap() error { return e.Err }

// Retryable is true for what may pass on its own: no answer, a timeout, a 5xx
// or 429. Any other 4xx needs someone to fix the hub or the registration.
func (e *APIError) Retryable() bool {
	var ne net.Error
	return e.Status == 0 || e.Status >= 500 || e.Status == http.StatusTooManyRequests ||
		errors.As(e.Err, &ne) && ne.Timeout()
}

// Failed turns a failed step into what Deliver and Withdraw return: a
// retryable failure is reported (Delivered False, SyncSetAPIError) and
// returned as an error, so the queue backs off; any other is reported as
// DeliveryFailed with the API's reason and not retried before the resync.
func Failed(err error) (fleet.DeliveryReport, error) {
	report := fleet.DeliveryReport{NoAgent: true, Reason: fleet.ReasonDeliveryFailed, Message: err.Error()}
	var api *APIError
	if !errors.As(err, &api) || api.Retryable() {
		report.Reason = fleet.ReasonSyncSetAPIError
		return report, err
	}
	return report, nil
}
