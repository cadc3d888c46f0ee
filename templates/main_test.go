package templates_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

// TestMain stops the test hub that the CloudNativePG template tests start.
func TestMain(m *testing.M) { hubtest.Main(m) }
