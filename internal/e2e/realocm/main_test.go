package realocm

import (
	"fmt"
	"os"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/e2e/e2estack"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// fleetManagerBinary is the fleet-manager built once for the package.
var fleetManagerBinary string

func TestMain(m *testing.M) {
	bin, remove, err := e2estack.BuildFleetManager("../../../cmd/fleet-manager")
	if err != nil {
		fmt.Fprintln(os.Stderr, "realocm:", err)
		os.Exit(1)
	}
	fleetManagerBinary = bin
	code := m.Run()
	// OCM's controllers first: they watch the hub.
	ocmtest.Stop()
	hubtest.Stop()
	hydratest.Stop()
	remove()
	os.Exit(code)
}
