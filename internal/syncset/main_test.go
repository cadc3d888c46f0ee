package syncset_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

// TestMain stops the shared test hub, started by the first Hive test that
// needs it, when the tests end.
func TestMain(m *testing.M) { hubtest.Main(m) }
