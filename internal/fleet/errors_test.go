package fleet_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestCatalogueCodesAreUniqueAndOrdered(t *testing.T) {
	t.Parallel()
	entries := fleet.Catalogue()
	for i, e := range entries {
		if e.Name == "" || e.Reason == "" || e.Kind == "" {
			t.Errorf("Catalogue()[%d] = %+v, want a name, reason and kind", i, e)
		}
		if i > 0 && entries[i-1].Code >= e.Code {
			t.Errorf("Catalogue() codes %d then %d: want strictly increasing", entries[i-1].Code, e.Code)
		}
		got, ok := fleet.LookupErrorCode(e.Code)
		if !ok || got != e {
			t.Errorf("LookupErrorCode(%d) = %+v, %v; want %+v", e.Code, got, ok, e)
		}
	}
	if _, ok := fleet.LookupErrorCode(0); ok {
		t.Errorf("LookupErrorCode(0) found an entry; 0 is no code")
	}
}

func TestErrorCodeOf(t *testing.T) {
	t.Parallel()
	notFound := fleet.Errorf(fleet.CodeNotFound, "cluster %q not found", "c1")
	cases := []struct {
		name        string
		err         error
		wantCode    fleet.ErrorCode
		wantMessage string
	}{
		{"fleet error", notFound, fleet.CodeNotFound, `cluster "c1" not found`},
		{"wrapped fleet error", fmt.Errorf("FindCluster(c1): %w", notFound), fleet.CodeNotFound, `cluster "c1" not found`},
		{"plain error hides its text", errors.New("pq: password authentication failed"), fleet.CodeInternal, "Unspecified internal error"},
		{"internal fleet error hides its text", fleet.Errorf(fleet.CodeInternal, "dial tcp 10.0.0.1"), fleet.CodeInternal, "Unspecified internal error"},
		{"no message uses the reason", &fleet.Error{Code: fleet.CodeConflict}, fleet.CodeConflict, "The resource changed or already exists"},
	}
	for _, tc := range cases {
		if got := fleet.ErrorCodeOf(tc.err); got != tc.wantCode {
			t.Errorf("%s: ErrorCodeOf() = %d, want %d", tc.name, got, tc.wantCode)
		}
		if got := fleet.ErrorMessageOf(tc.err); got != tc.wantMessage {
			t.Errorf("%s: ErrorMessageOf() = %q, want %q", tc.name, got, tc.wantMessage)
		}
	}
}

func TestErrorfWrapsItsCause(t *testing.T) {
	t.Parallel()
	err := fleet.Errorf(fleet.CodeUnavailable, "reading: %w", io.ErrUnexpectedEOF)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("errors.Is(Errorf(..., %%w, io.ErrUnexpectedEOF), io.ErrUnexpectedEOF) = false, want true")
	}
	if err.Error() != "reading: unexpected EOF" {
		t.Errorf("Errorf().Error() = %q", err.Error())
	}
}
