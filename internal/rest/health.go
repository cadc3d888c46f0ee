package rest

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadinessChecker tells whether the service can serve: its database answers
// and its schema is current.
type ReadinessChecker interface {
	Ready(ctx context.Context) error
}

// HealthStatus is the body of the health endpoints.
type HealthStatus struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Health probe paths, served on the health server.
const (
	LivenessPath  = "/healthz"
	ReadinessPath = "/readyz"
)

// NewHealthHandler serves the liveness probe (the process answers) and the
// readiness probe (ready answers nil within timeout; 503 otherwise).
func NewHealthHandler(ready ReadinessChecker, timeout time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LivenessPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, HealthStatus{Status: "ok"})
	})
	mux.HandleFunc("GET "+ReadinessPath, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := ready.Ready(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, HealthStatus{Status: "unavailable", Reason: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, HealthStatus{Status: "ready"})
	})
	return mux
}

// NewMetricsHandler serves the metrics of gatherer at /metrics.
func NewMetricsHandler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}
