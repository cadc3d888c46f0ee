package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/e2e/e2estack"
	"github.com/fleetmanager/fleet-manager/internal/hub/governancetest"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// fleetManagerBinary is the fleet-manager built once for the package.
var fleetManagerBinary string

func TestMain(m *testing.M) {
	bin, remove, err := e2estack.BuildFleetManager("../../cmd/fleet-manager")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	fleetManagerBinary = bin
	code := m.Run()
	// The engines first: they watch the hub.
	governancetest.Stop()
	ocmtest.Stop()
	hubtest.Stop()
	hydratest.Stop()
	remove()
	os.Exit(code)
}
