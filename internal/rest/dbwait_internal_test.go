package rest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestOrdinaryOperationsBoundTheirDatabaseWaits: every operation of the specs
// bounds its waits on the database (--db-wait-timeout) but the long-polls,
// the agent's desired set and the change feeds, and the batch endpoints,
// which keep their longer deadlines.
func TestOrdinaryOperationsBoundTheirDatabaseWaits(t *testing.T) {
	t.Parallel()
	s, err := NewServer(context.Background(), DefaultConfig(), slog.New(slog.DiscardHandler), nil, nil, Services{})
	if err != nil {
		t.Fatalf("NewServer(): %v", err)
	}
	var unbounded []string
	ops := s.operations()
	for _, op := range ops {
		var bounded bool
		h := s.withDeadline(op, func(_ http.ResponseWriter, r *http.Request) error {
			bounded = fleet.BoundedDatabaseWait(r.Context())
			return nil
		})
		if err := h(httptest.NewRecorder(), httptest.NewRequest(op.route.Method, "/", nil)); err != nil {
			t.Fatalf("%s: %v", op.route.Operation.OperationID, err)
		}
		if !bounded {
			unbounded = append(unbounded, op.route.Operation.OperationID)
		}
	}
	slices.Sort(unbounded)
	want := []string{"createClusters", "getHubDesired", "listManagedClusterChanges", "listResourceChanges",
		"postHubInventory", "postHubResources", "putRegistrationsStatus"}
	if !slices.Equal(unbounded, want) {
		t.Errorf("operations without the database wait bound = %v, want %v (of %d)", unbounded, want, len(ops))
	}
}
