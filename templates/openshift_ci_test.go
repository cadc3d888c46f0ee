package templates_test

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The OpenShift CI files, relative to this package.
const (
	buildRootDockerfile = "../.openshift-ci/build-root/Dockerfile"
	ciOperatorConfig    = "../.openshift-ci/config.yaml"
)

// notBuiltInTheBuildRoot are the scripts of `make test/binaries` that the
// build root does not run, and why.
var notBuiltInTheBuildRoot = map[string]string{
	"scripts/release/build-previous.sh": "it builds from the repository's history, which the image's context leaves out; the test job builds it into FLEET_MANAGER_CACHE",
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ENV...
	args string
}

// readDockerfile returns the instructions of a Dockerfile without comments.
func readDockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if trimmed := strings.TrimRight(line, " \t"); strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		if text := strings.TrimSpace(cur.String()); text != "" {
			cmd, args, _ := strings.Cut(text, " ")
			out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")})
		}
		cur.Reset()
	}
	return out
}

// envOf returns the ENV values of the instructions (NAME=value forms).
func envOf(ins []instruction) map[string]string {
	env := map[string]string{}
	for _, in := range ins {
		if in.cmd != "ENV" {
			continue
		}
		for _, kv := range strings.Fields(in.args) {
			if name, value, ok := strings.Cut(kv, "="); ok {
				env[name] = value
			}
		}
	}
	return env
}

// aptInstalled returns the packages the RUN instructions apt-get install.
func aptInstalled(ins []instruction) []string {
	var pkgs []string
	for _, in := range ins {
		if in.cmd != "RUN" {
			continue
		}
		for _, part := range strings.Split(in.args, "apt-get install")[1:] {
			cmd, _, _ := strings.Cut(part, "&&")
			for _, word := range strings.Fields(cmd) {
				if !strings.HasPrefix(word, "-") {
					pkgs = append(pkgs, word)
				}
			}
		}
	}
	return pkgs
}

// scriptPackages returns the Debian packages ensure-tools.sh installs when
// their tools are missing: its `missing+=(package)` lines.
func scriptPackages(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../scripts/dbops/ensure-tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, m := range regexp.MustCompile(`missing\+=\(([a-z0-9.+-]+)\)`).FindAllStringSubmatch(string(data), -1) {
		pkgs = append(pkgs, m[1])
	}
	if len(pkgs) < 5 {
		t.Fatalf("ensure-tools.sh: found %d packages (%v); has the way it lists them changed?", len(pkgs), pkgs)
	}
	return pkgs
}

// testBinaryScripts returns the scripts the Makefile's test/binaries recipe runs.
func testBinaryScripts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(data), "\ntest/binaries:")
	if !ok {
		t.Fatal("Makefile has no test/binaries target")
	}
	var scripts []string
	for _, line := range strings.Split(recipe, "\n")[1:] {
		if !strings.HasPrefix(line, "\t") {
			break
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "scripts/") {
			scripts = append(scripts, f[0])
		}
	}
	if len(scripts) < 4 {
		t.Fatalf("Makefile test/binaries runs %d scripts (%v); has its recipe changed?", len(scripts), scripts)
	}
	return scripts
}

// TestBuildRootInstallsWhatTheScriptsWouldInstall: the build root installs
// every Debian package scripts/dbops/ensure-tools.sh would install with
// apt-get (which needs root, and CI runs as an arbitrary user), PostgreSQL
// for scripts/db.sh, and jq for the docs' examples that the tests run; and it
// runs ensure-tools.sh, which finds them all and installs nothing.
func TestBuildRootInstallsWhatTheScriptsWouldInstall(t *testing.T) {
	t.Parallel()
	ins := readDockerfile(t, buildRootDockerfile)
	installed := aptInstalled(ins)
	for _, pkg := range append(scriptPackages(t), "postgresql-15", "jq", "make", "git") {
		if !slices.Contains(installed, pkg) {
			t.Errorf("build root: apt-get installs %v, not %s", installed, pkg)
		}
	}
	if !runs(ins, "scripts/dbops/ensure-tools.sh") {
		t.Error("build root: no RUN of scripts/dbops/ensure-tools.sh (it checks that every tool is there)")
	}
}

// runs reports whether a RUN instruction runs script (by any prefix of its path).
func runs(ins []instruction, script string) bool {
	return slices.ContainsFunc(ins, func(in instruction) bool {
		return in.cmd == "RUN" && regexp.MustCompile(`(^|[\s/])`+regexp.QuoteMeta(script)+`(\s|$)`).MatchString(in.args)
	})
}

// TestBuildRootBuildsTheTestBinaries: the build root runs every script of
// `make test/binaries` (but those notBuiltInTheBuildRoot explains), after
// copying it in, into FLEET_MANAGER_CACHE; and .dockerignore lets each
// copied file into the build context.
func TestBuildRootBuildsTheTestBinaries(t *testing.T) {
	t.Parallel()
	ins := readDockerfile(t, buildRootDockerfile)
	allowed := dockerignoreAllowed(t)
	for _, script := range testBinaryScripts(t) {
		if why, ok := notBuiltInTheBuildRoot[script]; ok {
			if runs(ins, script) {
				t.Errorf("build root runs %s, which notBuiltInTheBuildRoot says it does not: %s", script, why)
			}
			continue
		}
		if !runs(ins, script) {
			t.Errorf("build root: no RUN of %s, which make test/binaries runs", script)
		}
		if !copies(ins, script) {
			t.Errorf("build root: no COPY brings %s into the image", script)
		}
		if !slices.ContainsFunc(allowed, func(a string) bool { return a == script || strings.HasPrefix(script, a) }) {
			t.Errorf(".dockerignore keeps %s out of the build root's context (it allows %v)", script, allowed)
		}
		for _, helper := range scriptsCalledBy(t, script) {
			if !copies(ins, helper) {
				t.Errorf("build root: no COPY brings %s, which %s runs, into the image", helper, script)
			}
			if !slices.ContainsFunc(allowed, func(a string) bool { return a == helper || strings.HasPrefix(helper, a) }) {
				t.Errorf(".dockerignore keeps %s, which %s runs, out of the build root's context", helper, script)
			}
		}
	}
	env := envOf(ins)
	if cache := env["FLEET_MANAGER_CACHE"]; !path.IsAbs(cache) {
		t.Errorf("build root: FLEET_MANAGER_CACHE=%q, want an absolute folder that the scripts build into and the tests read", cache)
	}
}

// scriptsCalledBy returns the other shell scripts of scripts/ that script
// runs, directly or through another (they name each other by file name and
// find each other relative to their own folder), such as
// scripts/with-progress.sh.
func scriptsCalledBy(t *testing.T, script string) []string {
	t.Helper()
	var all []string
	for _, pattern := range []string{"../scripts/*.sh", "../scripts/*/*.sh"} {
		found, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range found {
			all = append(all, strings.TrimPrefix(path, "../"))
		}
	}
	seen := map[string]bool{script: true}
	var called []string
	for todo := []string{script}; len(todo) > 0; {
		body, err := os.ReadFile("../" + todo[0])
		if err != nil {
			t.Fatal(err)
		}
		todo = todo[1:]
		for _, name := range all {
			if !seen[name] && strings.Contains(string(body), filepath.Base(name)) {
				seen[name] = true
				called = append(called, name)
				todo = append(todo, name)
			}
		}
	}
	return called
}

// copies reports whether a COPY instruction's sources hold file.
func copies(ins []instruction, file string) bool {
	return slices.ContainsFunc(ins, func(in instruction) bool {
		if in.cmd != "COPY" {
			return false
		}
		f := strings.Fields(in.args)
		return slices.ContainsFunc(f[:len(f)-1], func(src string) bool {
			return src == file || (strings.HasSuffix(src, "/") && strings.HasPrefix(file, src))
		})
	})
}

// dockerignoreAllowed returns the paths .dockerignore's "!" lines let in.
func dockerignoreAllowed(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "!"); ok {
			allowed = append(allowed, p)
		}
	}
	return allowed
}

// TestBuildRootIsWritableByAnArbitraryUID: OpenShift runs the jobs under an
// arbitrary UID in group 0 without a home, so HOME is a writable folder, Go's
// caches are set, and the last instruction hands every folder a job writes to
// group 0, group-writable, after everything that fills them.
func TestBuildRootIsWritableByAnArbitraryUID(t *testing.T) {
	t.Parallel()
	ins := readDockerfile(t, buildRootDockerfile)
	env := envOf(ins)
	if env["HOME"] != "/tmp" {
		t.Errorf("build root: HOME=%q, want /tmp (the arbitrary UID has no home)", env["HOME"])
	}
	last := ins[len(ins)-1]
	if last.cmd != "RUN" || !strings.Contains(last.args, "chgrp -R 0 ") || !strings.Contains(last.args, "chmod -R g+rwX ") {
		t.Fatalf("build root: the last instruction is %s %s, want a RUN of chgrp -R 0 and chmod -R g+rwX", last.cmd, last.args)
	}
	for _, name := range []string{"GOPATH", "GOCACHE", "GOMODCACHE", "FLEET_MANAGER_CACHE"} {
		dir := env[name]
		if !path.IsAbs(dir) {
			t.Errorf("build root: %s=%q, want an absolute folder", name, dir)
			continue
		}
		for _, tool := range []string{"chgrp -R 0 ", "chmod -R g+rwX "} {
			_, args, _ := strings.Cut(last.args, tool)
			args, _, _ = strings.Cut(args, "&&")
			if !slices.ContainsFunc(strings.Fields(args), func(arg string) bool {
				arg = strings.Trim(arg, `"`)
				if arg == "$"+name {
					return true
				}
				return path.IsAbs(arg) && (dir == arg || strings.HasPrefix(dir, strings.TrimSuffix(arg, "/")+"/"))
			}) {
				t.Errorf("build root: %s(%s=%s) leaves it out: %q", strings.TrimSpace(tool), name, dir, args)
			}
		}
	}
}

// ciConfig is the part of a ci-operator configuration the test reads.
type ciConfig struct {
	BuildRoot struct {
		ProjectImage struct {
			DockerfilePath string `json:"dockerfile_path"`
		} `json:"project_image"`
	} `json:"build_root"`
	Resources map[string]struct {
		Requests map[string]string `json:"requests"`
	} `json:"resources"`
	Tests []struct {
		As        string `json:"as"`
		Commands  string `json:"commands"`
		Container struct {
			From string `json:"from"`
		} `json:"container"`
	} `json:"tests"`
}

// makeTargets returns the targets of the `make` commands in script.
func makeTargets(script string) []string {
	var targets []string
	for _, line := range strings.Split(script, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "make" {
			targets = append(targets, f[1:]...)
		}
	}
	return targets
}

// TestOpenShiftCIRunsWhatCIRuns: config.yaml builds its build root from the
// Dockerfile above, its tests in the build root run exactly the make targets
// of .ci/run, and the test job (make test) asks for the resources the
// tests need.
func TestOpenShiftCIRunsWhatCIRuns(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(ciOperatorConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg ciConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", ciOperatorConfig, err)
	}
	if got, want := cfg.BuildRoot.ProjectImage.DockerfilePath, strings.TrimPrefix(buildRootDockerfile, "../"); got != want {
		t.Errorf("build_root.project_image.dockerfile_path = %q, want %q", got, want)
	}
	run, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	want := makeTargets(string(run))
	var got []string
	testJob := false
	for _, test := range cfg.Tests {
		if test.Container.From != "src" {
			continue
		}
		got = append(got, makeTargets(test.Commands)...)
		if strings.TrimSpace(test.Commands) == "make test" {
			testJob = true
			req := cfg.Resources[test.As].Requests
			if req["cpu"] == "" || req["memory"] == "" {
				t.Errorf("resources.%s.requests = %v, want cpu and memory for go test -race and the servers it starts", test.As, req)
			}
		}
	}
	if !testJob {
		t.Error("no test of config.yaml runs `make test` in the build root")
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("config.yaml's tests run the make targets %v, .ci/run runs %v", got, want)
	}
}

// TestBuildRootCarriesTheSpecLinters: `make lint` runs the OpenAPI linters
// tools/openapi-lint pins, on Node.js, so the build root copies Node.js from
// a node image whose major release every pinned linter's engines accept,
// installs the linters (lint.sh --install) into FLEET_MANAGER_CACHE, and
// .dockerignore lets the files it copies into the context.
func TestBuildRootCarriesTheSpecLinters(t *testing.T) {
	t.Parallel()
	ins := readDockerfile(t, buildRootDockerfile)
	major := 0
	for _, in := range ins {
		if m := regexp.MustCompile(`^\S*/node:(\d+)\S* AS node$`).FindStringSubmatch(in.args); in.cmd == "FROM" && m != nil {
			major, _ = strconv.Atoi(m[1])
		}
	}
	if major == 0 {
		t.Fatal("build root: no FROM <registry>/node:<major>... AS node stage to copy Node.js from")
	}
	for _, linter := range []string{"@redocly/cli", "@stoplight/spectral-cli"} {
		if engines := lockedNodeEngines(t, linter); !acceptsMajor(engines, major) {
			t.Errorf("build root: Node.js %d is not among the releases %s %q accepts", major, linter, engines)
		}
	}
	for _, file := range []string{"/usr/local/bin/node", "/usr/local/lib/node_modules/npm"} {
		if !slices.ContainsFunc(ins, func(in instruction) bool {
			return in.cmd == "COPY" && strings.HasPrefix(in.args, "--from=node "+file+" ")
		}) {
			t.Errorf("build root: no COPY --from=node of %s", file)
		}
	}
	if !slices.ContainsFunc(ins, func(in instruction) bool {
		return in.cmd == "RUN" && strings.Contains(in.args, "tools/openapi-lint/lint.sh --install")
	}) {
		t.Error("build root: no RUN of tools/openapi-lint/lint.sh --install (the jobs would install the linters each time)")
	}
	allowed := dockerignoreAllowed(t)
	for _, file := range []string{"tools/openapi-lint/lint.sh", "tools/openapi-lint/package.json", "tools/openapi-lint/package-lock.json"} {
		if !copies(ins, file) {
			t.Errorf("build root: no COPY brings %s into the image", file)
		}
		if !slices.Contains(allowed, file) {
			t.Errorf(".dockerignore keeps %s out of the build root's context", file)
		}
	}
}

// lockedNodeEngines returns the engines.node of a package in the linters'
// package-lock.json.
func lockedNodeEngines(t *testing.T, pkg string) string {
	t.Helper()
	data, err := os.ReadFile("../tools/openapi-lint/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Engines map[string]string `json:"engines"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		t.Fatal(err)
	}
	p, ok := lock.Packages["node_modules/"+pkg]
	if !ok || p.Engines["node"] == "" {
		t.Fatalf("package-lock.json: no engines.node for %s", pkg)
	}
	return p.Engines["node"]
}

// acceptsMajor reports whether a semver range of npm's (alternatives joined
// by ||) accepts every release of a major line from some release on: an
// alternative >=X.Y with X <= major and no upper bound below major+1, or
// ^major.
func acceptsMajor(engines string, major int) bool {
	for _, alt := range strings.Split(engines, "||") {
		f := strings.Fields(strings.ReplaceAll(strings.TrimSpace(alt), ">= ", ">="))
		lowOK, highOK := false, true
		for _, c := range f {
			switch {
			case strings.HasPrefix(c, ">="):
				x, err := strconv.Atoi(strings.Split(strings.TrimPrefix(c, ">="), ".")[0])
				lowOK = err == nil && x <= major
			case strings.HasPrefix(c, "^"):
				x, err := strconv.Atoi(strings.Split(strings.TrimPrefix(c, "^"), ".")[0])
				lowOK = err == nil && x == major
			case strings.HasPrefix(c, "<"):
				x, err := strconv.Atoi(strings.Split(strings.TrimLeft(c, "<="), ".")[0])
				highOK = err == nil && x > major
			}
		}
		if lowOK && highOK {
			return true
		}
	}
	return false
}
