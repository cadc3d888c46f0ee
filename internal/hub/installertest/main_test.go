package installertest_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

func TestMain(m *testing.M) { hubtest.Main(m) }
