package fleet_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The architecture tests: which package may depend on which. They read the
// non-test imports, transitively, with `go list`; tests may wire real
// adapters together (the API tests run on PostgreSQL), binaries may wire
// everything. docs/architecture.md describes the same rules.

const module = "github.com/fleetmanager/fleet-manager"

// TestDomainImportsOnlyTheStandardLibrary keeps the domain package free of
// adapters and third-party code: it is what every other package may import.
func TestDomainImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != module+"/internal/fleet" {
			t.Errorf("internal/fleet depends on %s; the domain package imports only the standard library", dep)
		}
	}
}

// The components under internal/: a package belongs to the component of its
// first path element (internal/postgres/pgtest is postgres's).
var (
	// shared adapt nothing; any package may import them.
	shared = map[string]string{
		"fleet":     "the domain: types, errors and the interfaces the adapters implement",
		"config":    "the flag, environment and secrets-directory machinery of every component's configuration",
		"version":   "the version and commit the linker sets",
		"httpserve": "binding, serving and graceful shutdown of plain HTTP servers, the health and metrics endpoints: both binaries run them",
		"agentapi":  "the conversions between pkg/api/private and the domain: the agent hashes what the fleet manager stores",
		"hubkind":   "the hub's kinds (group, version, kind, resource, scope) and the one conversion to unstructured, for the agent, the SyncSet deliveries and their test hubs",
	}
	// adapters connect the domain to one thing outside (a database, a token
	// issuer, HTTP, a hub, OCM); they do not import each other.
	adapters = []string{"agent", "auth", "authz", "cli", "dnsprovider", "policyschema", "postgres", "reconcile", "rest", "secrets", "syncset", "usermetrics"}
	// wiring names which adapter serves each service; it imports any
	// adapter, and only binaries and tests import it.
	wiring = map[string]string{
		"stack": "builds the whole service (store, authorizer, API server, listener, reconcilers) for serve and the in-process tests",
	}
	// testSupport is imported by tests only.
	testSupport = []string{"childproc", "dnstest", "e2e", "hub", "logtest", "oidc", "promtest"}
	// allowedEdges are the only dependencies between two components neither
	// of which is shared, each with its reason. A new one fails
	// TestAdaptersDoNotImportEachOther until it is argued here and in
	// docs/architecture.md; one that no longer exists fails it too.
	allowedEdges = map[[2]string]string{
		{"postgres", "secrets"}:   "postgres takes a *secrets.Keyring to seal and open the secret columns",
		{"hub", "childproc"}:      "hub/hubtest starts its hub once per test binary with childproc.Shared, as hydratest starts Hydra",
		{"hub", "policyschema"}:   "hub/hubtest installs the Policy CRD policyschema embeds, so the test hub and the validator serve one schema from one file",
		{"oidc", "childproc"}:     "oidc/hydratest starts Ory Hydra as a child process",
		{"promtest", "childproc"}: "promtest starts Prometheus as a child process",
		{"dnstest", "childproc"}:  "dnstest starts BIND's named and Knot's knotd as child processes",
		{"e2e", "childproc"}:      "e2e/e2estack takes the fleet-manager binary's ports from childproc.FreePorts, which never hands out one port twice",
	}
)

// component returns the component of an import path under internal/, or "".
func component(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/internal/")
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	return first
}

// listDeps returns each package that pattern matches with its transitive
// non-test dependencies.
func listDeps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	pkgs := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			pkgs[f[0]] = f[1:]
		}
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %s: no packages", pattern)
	}
	return pkgs
}

// TestAdaptersDoNotImportEachOther: a package under internal/ depends on its
// own component, the shared packages and the allowed edges, nothing else.
func TestAdaptersDoNotImportEachOther(t *testing.T) {
	t.Parallel()
	seen := map[[2]string]bool{}
	for pkg, deps := range listDeps(t, module+"/internal/...") {
		from := component(pkg)
		if _, ok := wiring[from]; ok {
			continue
		}
		if _, ok := shared[from]; !ok && !slices.Contains(adapters, from) && !slices.Contains(testSupport, from) {
			t.Errorf("internal/%s is not classified: add it to shared, adapters, testSupport or wiring in %s", from, "internal/fleet/deps_test.go")
		}
		for _, dep := range deps {
			to := component(dep)
			if to == "" || to == from {
				continue
			}
			if _, ok := shared[to]; ok {
				continue
			}
			edge := [2]string{from, to}
			if _, ok := allowedEdges[edge]; ok {
				seen[edge] = true
				continue
			}
			t.Errorf("%s depends on %s: internal/%s may not import internal/%s (adapters do not import each other; see docs/architecture.md)",
				strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(dep, module+"/"), from, to)
		}
	}
	for edge, reason := range allowedEdges {
		if !seen[edge] {
			t.Errorf("allowed edge internal/%s -> internal/%s (%s) no longer exists: remove it", edge[0], edge[1], reason)
		}
	}
}

// TestPkgImportsNothingInternal: pkg/ is what other modules import, and they
// cannot import internal/.
func TestPkgImportsNothingInternal(t *testing.T) {
	t.Parallel()
	for pkg, deps := range listDeps(t, module+"/pkg/...") {
		for _, dep := range deps {
			if strings.HasPrefix(dep, module+"/internal/") {
				t.Errorf("%s depends on %s: pkg/ imports nothing under internal/",
					strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(dep, module+"/"))
			}
		}
	}
}

// TestAgentLinksNoAPIServerNorStore: fleetshard-sync, which runs on every hub,
// links neither the fleet manager's API server nor its store. It names where
// each forbidden package comes in: the package outside the forbidden ones
// that imports it.
func TestAgentLinksNoAPIServerNorStore(t *testing.T) {
	t.Parallel()
	checkLinksNoAPIServerNorStore(t, "cmd/fleetshard-sync")
}

// TestCLILinksNoAPIServerNorStore: fleetctl, which users install, is a client
// of the API only.
func TestCLILinksNoAPIServerNorStore(t *testing.T) {
	t.Parallel()
	checkLinksNoAPIServerNorStore(t, "cmd/fleetctl")
}

// checkLinksNoAPIServerNorStore fails when the binary of cmd links the API
// server, the store or the specs.
func checkLinksNoAPIServerNorStore(t *testing.T, cmd string) {
	t.Helper()
	forbidden := map[string]string{
		"github.com/getkin/kin-openapi": "the API server's request validation",
		"github.com/gorilla/mux":        "the API server's router",
		"gorm.io/gorm":                  "the store's ORM",
		module + "/internal/rest":       "the API server",
		module + "/internal/postgres":   "the store",
		module + "/openapi":             "the API's specs",
	}
	why := func(path string) string {
		for prefix, what := range forbidden {
			if path == prefix || strings.HasPrefix(path, prefix+"/") {
				return what
			}
		}
		return ""
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/"+cmd).Output()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v", cmd, err)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 || why(f[0]) != "" {
			continue
		}
		for _, imp := range f[1:] {
			if what := why(imp); what != "" {
				t.Errorf("%s links %s (%s): %s imports it", cmd, imp, what, strings.TrimPrefix(f[0], module+"/"))
			}
		}
	}
}
