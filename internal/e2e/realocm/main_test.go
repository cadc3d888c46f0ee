package realocm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// fleetManagerBinary is the fleet-manager built once for the package.
var fleetManagerBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fm-realocm-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "realocm:", err)
		os.Exit(1)
	}
	fleetManagerBinary = filepath.Join(dir, "fleet-manager")
	build := exec.Command("go", "build", "-o", fleetManagerBinary, "../../../cmd/fleet-manager")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "realocm: go build fleet-manager: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	// OCM's controllers first: they watch the hub.
	ocmtest.Stop()
	hubtest.Stop()
	hydratest.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
