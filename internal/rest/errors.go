package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// statusOf maps each error kind to its HTTP status: the only place that does.
func statusOf(kind fleet.ErrorKind) int {
	switch kind {
	case fleet.KindInvalid:
		return http.StatusBadRequest
	case fleet.KindUnauthenticated:
		return http.StatusUnauthorized
	case fleet.KindForbidden:
		return http.StatusForbidden
	case fleet.KindNotFound:
		return http.StatusNotFound
	case fleet.KindMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case fleet.KindConflict:
		return http.StatusConflict
	case fleet.KindPreconditionFailed:
		return http.StatusPreconditionFailed
	case fleet.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case fleet.KindUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case fleet.KindUnavailable:
		return http.StatusServiceUnavailable
	case fleet.KindGone:
		return http.StatusGone
	case fleet.KindTooManyRequests:
		return http.StatusTooManyRequests
	default:
		return http.StatusInternalServerError
	}
}

// errorBody renders a catalogue entry as the OCM error body.
func (s *Server) errorBody(entry fleet.CatalogueEntry, reason, operationID string) public.Error {
	id := strconv.Itoa(int(entry.Code))
	body := public.Error{
		Kind:   public.ErrorKindError,
		Id:     id,
		Href:   s.cfg.BasePath + "/errors/" + id,
		Code:   fmt.Sprintf("%s-%d", s.cfg.ErrorCodePrefix, entry.Code),
		Reason: reason,
	}
	if operationID != "" {
		body.OperationId = &operationID
	}
	return body
}

// retryAfterSeconds is the Retry-After of a 503: a database restart takes a
// few seconds, and a client that retries sooner only adds to the load.
const retryAfterSeconds = "2"

// writeError answers a request with err: the one function that turns errors
// into responses. Internal errors are logged with their cause; the caller sees
// only the generic reason and the operation id to quote.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := fleet.ErrorCodeOf(err)
	entry, ok := fleet.LookupErrorCode(code)
	if !ok {
		entry, _ = fleet.LookupErrorCode(fleet.CodeInternal)
	}
	opID := OperationID(r.Context())
	status := statusOf(entry.Kind)
	switch {
	case entry.Kind == fleet.KindUnavailable:
		// An outage, not a defect: the cause is logged, the client told when to retry.
		s.logger.WarnContext(r.Context(), "request failed: unavailable", "operation_id", opID, "error", err, "cause", fleet.Cause(err))
		w.Header().Set("Retry-After", retryAfterSeconds)
	case entry.Kind == fleet.KindTooManyRequests:
		w.Header().Set("Retry-After", retryAfterSeconds)
	case status >= http.StatusInternalServerError:
		s.logger.ErrorContext(r.Context(), "request failed", "operation_id", opID, "error", err)
	default:
		s.logger.DebugContext(r.Context(), "request refused", "operation_id", opID, "code", entry.Name, "reason", fleet.ErrorMessageOf(err))
	}
	if entry.Kind == fleet.KindUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+s.cfg.ServiceName+`"`)
	}
	body := s.errorBody(entry, fleet.ErrorMessageOf(err), opID)
	if details := fleet.ErrorDetailsOf(err); len(details) > 0 {
		body.Details = &details
	}
	writeJSON(w, status, body)
}

// writeJSON writes v as the JSON body of a response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An error here means the client went away; there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
