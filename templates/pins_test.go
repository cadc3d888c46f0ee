package templates_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// floatingOnPurpose lists the base images and image parameters that may
// name a moving tag, and why; docs/cve-maintenance.md says how each is kept
// current. Anything else must be pinned: a Dockerfile's FROM by digest, a
// template's image default by digest or by a minor release.
var floatingOnPurpose = map[string]string{
	".openshift-ci/build-root/Dockerfile FROM docker.io/library/golang:1.26-bookworm":  "CI's build root: ci-operator's inputs replace it with a mirrored image stream, and it must carry the newest Go patch",
	".openshift-ci/build-root/Dockerfile FROM docker.io/library/node:22-bookworm-slim": "CI's build root: only Node.js and npm for the OpenAPI linters are copied from it, the newest Node.js 22 patch on purpose; TestBuildRootCarriesTheSpecLinters holds the major to the linters' engines",
	"db-template.yml POSTGRESQL_IMAGE":                                                 "the development database; production uses cnpg-template.yml or RDS",
}

// TestEveryBaseImageIsPinned reads every Dockerfile of the repository and
// every *_IMAGE parameter of the templates: an image that moves under its tag
// would bring in a new base, and its CVEs or fixes, without a reviewed change.
func TestEveryBaseImageIsPinned(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	floating := func(what string) {
		seen[what] = true
		if _, ok := floatingOnPurpose[what]; !ok {
			t.Errorf("%s: not pinned; pin it by digest (scripts/refresh-base-images.sh does the root Dockerfile's) or add it to floatingOnPurpose with the reason", what)
		}
	}

	var dockerfiles []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." && d.Name() != ".openshift-ci" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if name := d.Name(); !d.IsDir() && (name == "Dockerfile" || name == "Containerfile" || strings.HasSuffix(name, ".Dockerfile")) {
			dockerfiles = append(dockerfiles, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WalkDir: %v", err)
	}
	if !slices.Contains(dockerfiles, filepath.Join("..", "Dockerfile")) {
		t.Fatalf("found Dockerfiles %v, want the root one among them", dockerfiles)
	}
	for _, path := range dockerfiles {
		rel, _ := filepath.Rel("..", path)
		args := dockerfileArgs(t, path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			from, ok := strings.CutPrefix(strings.TrimSpace(line), "FROM ")
			if !ok {
				continue
			}
			image := strings.Fields(from)[0]
			if m := regexp.MustCompile(`^\$\{?([A-Z_]+)\}?$`).FindStringSubmatch(image); m != nil {
				image = args[m[1]]
			}
			if !pinnedImage.MatchString(image) {
				floating(rel + " FROM " + image)
			}
		}
	}

	minorOrDigest := regexp.MustCompile(`(@sha256:[0-9a-f]{64}|:[0-9]+\.[0-9]+[^:/@]*)$`)
	for _, file := range []string{serviceFile, dbFile, cnpgFile, cnpgRecoveryFile, "agent-template.yml", monitoringFile} {
		for _, p := range load(t, file).Parameters {
			if strings.HasSuffix(p.Name, "_IMAGE") && !minorOrDigest.MatchString(p.Value) {
				floating(file + " " + p.Name)
			}
		}
	}
	for what := range floatingOnPurpose {
		if !seen[what] {
			t.Errorf("floatingOnPurpose[%q]: pinned now or gone; remove the entry", what)
		}
	}
}
