package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestLoopNamesItsReconciler checks that a pass's context names the
// reconciler, which its statements name to the database.
func TestLoopNamesItsReconciler(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got string
	loop(ctx, "provisioning_mgr", nil, time.Hour, func(ctx context.Context) (time.Duration, bool) {
		got = fleet.OperationFromContext(ctx)
		cancel()
		return 0, false
	})
	if got != "provisioning_mgr" {
		t.Errorf("a pass's operation = %q, want provisioning_mgr", got)
	}
}
