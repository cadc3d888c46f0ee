package rest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// caller returns the authenticated identity of the request.
func caller(r *http.Request) fleet.Identity {
	id, _ := fleet.IdentityFromContext(r.Context())
	return id
}

// decodeBody reads a JSON body already validated against the spec.
func decodeBody(r *http.Request, v any) error {
	return decodeJSON(r.Body, v)
}

// ifMatch reads If-Match as a generation: nil when absent or "*". A value
// that is no ETag of ours can match nothing.
func ifMatch(r *http.Request) (*int64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return nil, nil
	}
	n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil {
		return nil, fleet.Errorf(fleet.CodePreconditionFailed, "If-Match is not an ETag of this resource")
	}
	return &n, nil
}

// listQuery reads page, size, search and orderBy.
func listQuery(r *http.Request) fleet.ListQuery {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("size"))
	return fleet.ListQuery{Page: max(page, 1), Size: size, Search: q.Get("search"), OrderBy: q.Get("orderBy")}
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
