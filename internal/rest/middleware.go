package rest

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
)

// OperationIDHeader carries the operation id of a request, in and out.
const OperationIDHeader = "X-Operation-ID"

type operationIDKey struct{}

// OperationID returns the operation id of the request ctx belongs to.
func OperationID(ctx context.Context) string {
	id, _ := ctx.Value(operationIDKey{}).(string)
	return id
}

// operationIDPattern accepts ids a gateway may have set; anything else is replaced.
var operationIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// routeHolder is filled in by the router with the matched route's template, so
// that the outer middleware can label metrics and logs by template.
type routeHolder struct{ template string }

type routeHolderKey struct{}

// withObservability is the outermost middleware: operation id, panic recovery,
// the request log and the request metrics.
func (s *Server) withObservability(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		opID := r.Header.Get(OperationIDHeader)
		if !operationIDPattern.MatchString(opID) {
			opID = uuid.NewString()
		}
		holder := &routeHolder{}
		ctx := context.WithValue(r.Context(), operationIDKey{}, opID)
		ctx = context.WithValue(ctx, routeHolderKey{}, holder)
		r = r.WithContext(ctx)
		w.Header().Set(OperationIDHeader, opID)
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.logger.ErrorContext(ctx, "panic serving request", "operation_id", opID, "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					s.writeError(rec, r, errors.New("panic"))
				}
			}
			s.observe(r, holder.template, rec.status, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
}

// observe logs a finished request and records its metrics. The log has the
// path without its query, and never a header: tokens stay out of the log.
// elapsed is for a reader (the logger writes durations as HumanDuration does);
// elapsed_ms is the same as a number, for a log query's comparisons.
func (s *Server) observe(r *http.Request, template string, status int, elapsed time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	route := template
	if route == "" {
		route = "unmatched"
	}
	s.metrics.observe(route, r.Method, status, elapsed)
	s.logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("operation_id", OperationID(r.Context())),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Duration("elapsed", elapsed),
		slog.Float64("elapsed_ms", float64(elapsed.Microseconds())/1000),
	)
}

// recordRoute is a mux middleware that hands the matched template outwards.
func recordRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if holder, ok := r.Context().Value(routeHolderKey{}).(*routeHolder); ok {
			if t, err := mux.CurrentRoute(r).GetPathTemplate(); err == nil {
				holder.template = t
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate verifies the bearer token of every operation but the public ones
// and puts the caller's identity in the request context.
func (s *Server) authenticate(op operation, public bool, next handlerFunc) handlerFunc {
	if public {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		header := r.Header.Get("Authorization")
		scheme, token, found := strings.Cut(header, " ")
		if header == "" {
			return fleet.Errorf(fleet.CodeUnauthenticated, "a bearer token is required")
		}
		if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return fleet.Errorf(fleet.CodeUnauthenticated, "the Authorization header must be 'Bearer <token>'")
		}
		id, err := s.auth.Authenticate(r.Context(), strings.TrimSpace(token))
		if err != nil {
			return err
		}
		if err := checkAgentToken(op, id); err != nil {
			return err
		}
		ctx := fleet.NewContextWithSubject(fleet.NewContextWithIdentity(r.Context(), id), s.roles.Subject(id, true))
		return next(w, r.WithContext(ctx))
	}
}

// checkAgentToken keeps the agents' API to the agents: a token that carries
// an organisation is a user's, whatever else it carries (a user token's azp
// may equal a hub's agent identity), and never acts as a hub's agent. It is
// answered as a token of no agent is: the hub is not found, so a caller
// learns nothing of hubs that are not its own.
func checkAgentToken(op operation, id fleet.Identity) error {
	if op.spec.file != openapi.Private || id.OrgID == "" {
		return nil
	}
	return fleet.Errorf(fleet.CodeNotFound, "hub not found")
}

// validate checks the request against the operation's specification.
func (s *Server) validate(op operation, next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		limit := s.cfg.MaxBodyBytes
		switch {
		case op.spec.file == openapi.Private:
			limit = s.cfg.AgentMaxBodyBytes
		case isBatchCreate(op):
			limit = s.cfg.RegistrationBatchMaxBodyBytes
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if err := checkContentType(op, r); err != nil {
			return err
		}
		if err := checkRequestText(op, r); err != nil {
			return err
		}
		body, err := readBody(r)
		if err != nil {
			return requestError(err)
		}
		if err := checkBody(op, body); err != nil {
			return err
		}
		route := op.route
		input := &openapi3filter.RequestValidationInput{
			Request:    r,
			PathParams: mux.Vars(r),
			Route:      &route,
			Options: &openapi3filter.Options{
				AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
				// Defaults are the handlers' and the services' business: the
				// validator must not write them into the request.
				SkipSettingDefaults: true,
				// A batch's handler validates each item on its own.
				ExcludeRequestBody: isBatchCreate(op),
			},
		}
		if err := openapi3filter.ValidateRequest(r.Context(), input); err != nil {
			return requestError(err)
		}
		return next(w, r)
	}
}

// checkContentType refuses a body whose media type the operation does not
// declare, before the validator reads it.
func checkContentType(op operation, r *http.Request) error {
	body := op.route.Operation.RequestBody
	if body == nil || body.Value == nil || (r.ContentLength == 0 && r.Header.Get("Content-Type") == "") {
		return nil
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || body.Value.Content.Get(mediaType) == nil {
		return fleet.Errorf(fleet.CodeUnsupportedMediaType, "this Content-Type is not accepted here; send one of %v",
			slices.Sorted(maps.Keys(body.Value.Content)))
	}
	return nil
}
