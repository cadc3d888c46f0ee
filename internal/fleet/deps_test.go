package fleet_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainImportsOnlyTheStandardLibrary keeps the domain package free of
// adapters and third-party code: it is what every other package may import.
func TestDomainImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/fleetmanager/fleet-manager/internal/fleet" {
			t.Errorf("internal/fleet depends on %s; the domain package imports only the standard library", dep)
		}
	}
}
