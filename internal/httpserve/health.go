package httpserve

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// ReadinessChecker tells whether the process can do its work: for the
// service, its database answers and its schema is current (*postgres.DB); for
// the agent, it holds the hub's lease and hears from both sides (*agent.Agent).
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

// HealthOption configures the health handler.
type HealthOption func(*healthHandler)

// WithHealthLog logs why the process is not ready, with the details (server,
// user, database) the probe's answer leaves out.
func WithHealthLog(logger *slog.Logger) HealthOption {
	return func(h *healthHandler) { h.logger = logger }
}

type healthHandler struct {
	ready   ReadinessChecker
	timeout time.Duration
	logger  *slog.Logger
}

// NewHealthHandler serves the liveness probe (the process answers) and the
// readiness probe (ready answers nil within timeout; 503 otherwise). The 503's
// reason is the message of a *fleet.Error (the database's "database
// unreachable"), never its cause; the cause goes to the log.
func NewHealthHandler(ready ReadinessChecker, timeout time.Duration, opts ...HealthOption) http.Handler {
	h := &healthHandler{ready: ready, timeout: timeout, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(h)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LivenessPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, HealthStatus{Status: "ok"})
	})
	mux.HandleFunc("GET "+ReadinessPath, h.serveReadiness)
	return mux
}

func (h *healthHandler) serveReadiness(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	err := h.ready.Ready(ctx)
	if err == nil {
		writeJSON(w, http.StatusOK, HealthStatus{Status: "ready"})
		return
	}
	reason, cause := err.Error(), err
	var fe *fleet.Error
	if errors.As(err, &fe) {
		reason = fleet.ErrorMessageOf(err)
		if fe.Err != nil {
			cause = fe.Err
		}
	}
	h.logger.WarnContext(ctx, "not ready", "reason", reason, "error", cause)
	writeJSON(w, http.StatusServiceUnavailable, HealthStatus{Status: "unavailable", Reason: reason})
}

// NewMetricsHandler serves the metrics of gatherer at /metrics and, with
// profiling, Go's runtime profiles at /debug/pprof/ (net/http/pprof: the
// index, cmdline, profile, symbol, trace and every named profile). The
// profiles name the code and its memory, so they go on the metrics
// server only, off by default (--metrics-pprof).
func NewMetricsHandler(gatherer prometheus.Gatherer, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// writeJSON writes v as the JSON body of a response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An error here means the client went away; there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
