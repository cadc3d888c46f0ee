package rest

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// metricsCaller is the request's caller as the metrics service sees it,
// once its organisation's rate limit admits the request.
func (s *Server) metricsCaller(r *http.Request) (fleet.MetricsCaller, error) {
	c := fleet.MetricsCaller{Identity: caller(r), Admin: s.subject(r).FleetViewer}
	return c, s.services.Metrics.Admit(c)
}

// handleMetricsQuery serves an instant query, or with ranged a range query
// (GET, or POST with a form: FormValue reads both).
func (s *Server) handleMetricsQuery(ranged bool) handlerFunc {
	required, times := []string{"query"}, []string{"time"}
	if ranged {
		required, times = []string{"query", "start", "end", "step"}, []string{"start", "end"}
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.metricsCaller(r)
		if err != nil {
			return err
		}
		for _, name := range required {
			if r.FormValue(name) == "" {
				return fleet.Errorf(fleet.CodeValidation, "parameter %s is required", name)
			}
		}
		parsed := map[string]time.Time{}
		for _, name := range times {
			if parsed[name], err = promTime(r, name); err != nil {
				return err
			}
		}
		q := fleet.MetricsQuery{Query: r.FormValue("query"), Range: ranged, Time: parsed["time"], Start: parsed["start"], End: parsed["end"]}
		if ranged {
			if q.Step, err = promDuration(r, "step"); err != nil {
				return err
			}
		}
		if q.Timeout, err = promDuration(r, "timeout"); err != nil {
			return err
		}
		return s.writeMetricsAnswer(w, r, c, q)
	}
}

// writeMetricsAnswer runs the query and writes the backend's answer, as
// the service rendered it.
func (s *Server) writeMetricsAnswer(w http.ResponseWriter, r *http.Request, c fleet.MetricsCaller, q fleet.MetricsQuery) error {
	body, err := s.services.Metrics.Query(r.Context(), c, q)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(body)
	return err
}

// metricsTextType is the Prometheus text exposition format's media type.
const metricsTextType = "text/plain; version=0.0.4; charset=utf-8"

// handleMetricsText serves the caller's clusters' metrics as a scrape target.
func (s *Server) handleMetricsText(w http.ResponseWriter, r *http.Request) error {
	return s.writeMetricsText(w, r, "")
}

// handleClusterMetricsText serves one registration's cluster's metrics.
func (s *Server) handleClusterMetricsText(w http.ResponseWriter, r *http.Request) error {
	return s.writeMetricsText(w, r, pathParam(r, "id"))
}

func (s *Server) writeMetricsText(w http.ResponseWriter, r *http.Request, registrationID string) error {
	c, err := s.metricsCaller(r)
	if err != nil {
		return err
	}
	// Rendered whole before the status is written, so a failure half-way
	// is an error body, not a truncated exposition.
	var buf bytes.Buffer
	if err := s.services.Metrics.WriteText(r.Context(), c, registrationID, &buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", metricsTextType)
	w.WriteHeader(http.StatusOK)
	_, err = buf.WriteTo(w)
	return err
}

// promTime parses a Prometheus API time: Unix seconds (with a fraction) or
// RFC 3339; zero when absent.
func promTime(r *http.Request, name string) (time.Time, error) {
	v := r.FormValue(name)
	if v == "" {
		return time.Time{}, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1e11 {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fleet.Errorf(fleet.CodeValidation, "parameter %s must be an RFC 3339 time or Unix seconds", name)
}

// promDuration parses a Prometheus API duration: `30s`, `5m`, or seconds;
// zero when absent.
func promDuration(r *http.Request, name string) (time.Duration, error) {
	v := r.FormValue(name)
	if v == "" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	if d, err := model.ParseDuration(v); err == nil && d > 0 {
		return time.Duration(d), nil
	}
	return 0, fleet.Errorf(fleet.CodeValidation, "parameter %s must be a positive duration (30s, 5m) or seconds", name)
}
