package fleet

import (
	"errors"
	"fmt"
	"sort"
)

// ErrorKind is the closed set of error classes. The HTTP edge maps each kind to
// one status code; nothing below the edge knows about HTTP.
type ErrorKind string

// The error kinds. Adding one means adding its status in the HTTP edge too.
const (
	KindInvalid            ErrorKind = "invalid"
	KindUnauthenticated    ErrorKind = "unauthenticated"
	KindForbidden          ErrorKind = "forbidden"
	KindNotFound           ErrorKind = "not_found"
	KindMethodNotAllowed   ErrorKind = "method_not_allowed"
	KindConflict           ErrorKind = "conflict"
	KindPreconditionFailed ErrorKind = "precondition_failed"
	KindTooLarge           ErrorKind = "too_large"
	KindUnsupportedMedia   ErrorKind = "unsupported_media_type"
	KindGone               ErrorKind = "gone"
	KindInternal           ErrorKind = "internal"
	KindUnavailable        ErrorKind = "unavailable"
	KindTooManyRequests    ErrorKind = "too_many_requests"
)

// ErrorCode identifies one entry of the error catalogue. Codes are stable: a
// client may branch on them, so a code is never renumbered or reused. The HTTP
// edge renders a code as "<PREFIX>-<n>" with the configured prefix.
type ErrorCode int

// The catalogue's codes. New codes are appended; see Catalogue for their meaning.
const (
	CodeInternal               ErrorCode = 1
	CodeUnauthenticated        ErrorCode = 2
	CodeForbidden              ErrorCode = 3
	CodeNotFound               ErrorCode = 4
	CodeMethodNotAllowed       ErrorCode = 5
	CodeValidation             ErrorCode = 6
	CodeMalformedBody          ErrorCode = 7
	CodeConflict               ErrorCode = 8
	CodePreconditionFailed     ErrorCode = 9
	CodeUnavailable            ErrorCode = 10
	CodeBodyTooLarge           ErrorCode = 11
	CodeUnsupportedMediaType   ErrorCode = 12
	CodeBadSearch              ErrorCode = 13
	CodeBadOrderBy             ErrorCode = 14
	CodeQuotaExceeded          ErrorCode = 15
	CodeOrgNotAllowed          ErrorCode = 16
	CodeUserNotAllowed         ErrorCode = 17
	CodeProductNotAccepted     ErrorCode = 18
	CodeNameTaken              ErrorCode = 19
	CodeIdempotencyKeyReused   ErrorCode = 20
	CodeHubInUse               ErrorCode = 21
	CodeAdminRoleRequired      ErrorCode = 22
	CodeHubIdentityTaken       ErrorCode = 23
	CodeCursorExpired          ErrorCode = 24
	CodeZoneNotServed          ErrorCode = 25
	CodePolicyInvalid          ErrorCode = 26
	CodeActionForbidden        ErrorCode = 27
	CodeCapacityExhausted      ErrorCode = 28
	CodeMetricsQueryRefused    ErrorCode = 29
	CodeMetricsBackend         ErrorCode = 30
	CodeRateLimited            ErrorCode = 31
	CodeMetricsTooManyClusters ErrorCode = 32
	CodeDNSWriterNotAllowed    ErrorCode = 33
	CodePoolQuotaExceeded      ErrorCode = 34
)

// CatalogueEntry describes one error code: its kind and the reason a client sees
// when the error carries no more specific message.
type CatalogueEntry struct {
	Code   ErrorCode
	Kind   ErrorKind
	Name   string
	Reason string
}

// Catalogue returns every error code the service can answer with, ordered by code.
func Catalogue() []CatalogueEntry {
	entries := []CatalogueEntry{
		{CodeInternal, KindInternal, "Internal", "Unspecified internal error"},
		{CodeUnauthenticated, KindUnauthenticated, "Unauthenticated", "Account authentication could not be verified"},
		{CodeForbidden, KindForbidden, "Forbidden", "Forbidden to perform this action"},
		{CodeNotFound, KindNotFound, "NotFound", "Resource not found"},
		{CodeMethodNotAllowed, KindMethodNotAllowed, "MethodNotAllowed", "Method not allowed on this resource"},
		{CodeValidation, KindInvalid, "Validation", "The request does not match the API specification"},
		{CodeMalformedBody, KindInvalid, "MalformedBody", "The request body could not be parsed"},
		{CodeConflict, KindConflict, "Conflict", "The resource changed or already exists"},
		{CodePreconditionFailed, KindPreconditionFailed, "PreconditionFailed", "The If-Match precondition did not hold"},
		{CodeUnavailable, KindUnavailable, "Unavailable", "The service is temporarily unavailable"},
		{CodeBodyTooLarge, KindTooLarge, "BodyTooLarge", "The request body is larger than allowed"},
		{CodeUnsupportedMediaType, KindUnsupportedMedia, "UnsupportedMediaType", "The request content type is not supported"},
		{CodeBadSearch, KindInvalid, "BadSearch", "The search expression is invalid"},
		{CodeBadOrderBy, KindInvalid, "BadOrderBy", "The orderBy expression is invalid"},
		{CodeQuotaExceeded, KindForbidden, "QuotaExceeded", "The organisation has reached its quota of cluster registrations"},
		{CodeOrgNotAllowed, KindForbidden, "OrgNotAllowed", "The organisation may not register clusters"},
		{CodeUserNotAllowed, KindForbidden, "UserNotAllowed", "The user may not register clusters"},
		{CodeProductNotAccepted, KindInvalid, "ProductNotAccepted", "The cluster product is not accepted by this service"},
		{CodeNameTaken, KindConflict, "NameTaken", "The name is already used by another live resource"},
		{CodeIdempotencyKeyReused, KindConflict, "IdempotencyKeyReused", "The Idempotency-Key was used before with a different request"},
		{CodeHubInUse, KindConflict, "HubInUse", "The hub still has registrations placed on it"},
		{CodeAdminRoleRequired, KindForbidden, "AdminRoleRequired", "The caller lacks the administrator role this operation needs"},
		{CodeHubIdentityTaken, KindConflict, "HubIdentityTaken", "The agent identity is already bound to another hub"},
		{CodeCursorExpired, KindGone, "CursorExpired", "The cursor is older than the change feed's retention: list the collection again and resume from the cursor the list returns"},
		{CodeZoneNotServed, KindConflict, "ZoneNotServed", "This deployment does not serve the zone; the reason names the deployment that does"},
		{CodePolicyInvalid, KindInvalid, "PolicyInvalid", "The policy does not match the Policy CRD's schema; the reason names each field at fault"},
		{CodeActionForbidden, KindForbidden, "ActionForbidden", "The caller's roles do not allow this action; the reason names the action"},
		{CodeCapacityExhausted, KindConflict, "CapacityExhausted", "No cluster of the capacity pool has room for the reservation; the pool adds one unless it is at max_clusters"},
		{CodeMetricsQueryRefused, KindInvalid, "MetricsQueryRefused", "The metrics query is not allowed: it names a metric or label off the allow-list, reaches past the range or resolution bounds, or does not parse"},
		{CodeMetricsBackend, KindInvalid, "MetricsBackendRefused", "The metrics backend could not evaluate the query; the reason gives its answer"},
		{CodeRateLimited, KindTooManyRequests, "RateLimited", "The organisation sent more requests than its rate limit allows; retry after the Retry-After header's seconds"},
		{CodeMetricsTooManyClusters, KindInvalid, "MetricsTooManyClusters", "The request covers more clusters than one metrics read may; read fewer (one cluster's metrics, or a narrower scope)"},
		{CodeDNSWriterNotAllowed, KindForbidden, "DNSWriterNotAllowed", "The caller's organisation or service account is not one of the DNS service's writers; its administrators onboard writers"},
		{CodePoolQuotaExceeded, KindConflict, "PoolQuotaExceeded", "The organisation is at one of its capacity-pool limits (pools, pool clusters, reserved units); the reason names the limit"},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Code < entries[j].Code })
	return entries
}

// LookupErrorCode returns the catalogue entry of code.
func LookupErrorCode(code ErrorCode) (CatalogueEntry, bool) {
	for _, e := range Catalogue() {
		if e.Code == code {
			return e, true
		}
	}
	return CatalogueEntry{}, false
}

// Error is the service's error: a catalogue code, a message safe to show to the
// caller, and optionally the underlying cause (never shown to the caller).
type Error struct {
	Code    ErrorCode
	Message string
	Err     error
	// Details are facts a client may act on, shown beside the message, e.g.
	// the deployment that serves a zone. Never secrets.
	Details map[string]string
}

// Errorf returns an *Error with code and a formatted message. A %w verb wraps its
// operand as the cause, as fmt.Errorf does.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if entry, ok := LookupErrorCode(e.Code); ok {
		return entry.Reason
	}
	return fmt.Sprintf("error code %d", e.Code)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Cause returns the cause a service error keeps from its callers for the log
// (its Err: the database's own error behind an unavailability), or err
// itself when it keeps none.
func Cause(err error) error {
	var fe *Error
	if errors.As(err, &fe) && fe.Err != nil {
		return fe.Err
	}
	return err
}

// ErrorCodeOf returns the code of the first *Error in err's chain, or
// CodeInternal for any other error (and for nil, which callers should not pass).
func ErrorCodeOf(err error) ErrorCode {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return CodeInternal
}

// ErrorMessageOf returns the message that may be shown to a caller: the message
// of the first *Error in err's chain, or the generic internal reason, so that an
// unexpected error never leaks its details.
func ErrorMessageOf(err error) string {
	var fe *Error
	if errors.As(err, &fe) && fe.Code != CodeInternal {
		return fe.Error()
	}
	entry, _ := LookupErrorCode(CodeInternal)
	return entry.Reason
}

// ErrorDetailsOf returns the details of the first *Error in err's chain, nil
// for any other error.
func ErrorDetailsOf(err error) map[string]string {
	var fe *Error
	if errors.As(err, &fe) && fe.Code != CodeInternal {
		return fe.Details
	}
	return nil
}
