package fleet_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestFastPackagesClassification keeps scripts/fast-packages.sh, which picks
// the packages `make test/fast` runs, honest: the domain package, the
// authorization policy and the reconcilers' decisions, whose tests need
// nothing, are fast; the packages whose tests run on PostgreSQL, the test
// hub or the real binaries are not. The script itself fails when one of its
// harnesses was renamed or a new one is missing from its list. It runs the
// script, which only reads `go list`: this package stays fast.
func TestFastPackagesClassification(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("bash", "../../scripts/fast-packages.sh").Output()
	if err != nil {
		stderr := ""
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("scripts/fast-packages.sh: %v\n%s", err, stderr)
	}
	fast := strings.Fields(string(out))
	for _, pkg := range fast {
		if !strings.HasPrefix(pkg, module+"/") {
			t.Errorf("scripts/fast-packages.sh printed %q, not a package of %s", pkg, module)
		}
	}
	for _, pkg := range []string{"internal/fleet", "internal/authz", "internal/reconcile"} {
		if !slices.Contains(fast, module+"/"+pkg) {
			t.Errorf("%s is not among the fast packages; its tests need no server:\n%s", pkg, out)
		}
	}
	for _, pkg := range []string{"internal/postgres", "internal/postgres/pgtest", "internal/rest", "internal/reconcile/onpostgres", "internal/agent", "internal/e2e", "internal/hub/hubtest"} {
		if slices.Contains(fast, module+"/"+pkg) {
			t.Errorf("%s is among the fast packages, but its tests need a server (PostgreSQL, the test hub or the binaries)", pkg)
		}
	}
}
