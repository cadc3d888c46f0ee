package templates_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildKitOnly matches the Dockerfile features only BuildKit takes: a parser
// directive choosing a frontend, RUN --mount (cache, secret, ssh), heredocs,
// and COPY --link. OpenShift's Docker-strategy builds, podman and a docker
// build without BuildKit refuse or misread them.
var buildKitOnly = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^#\s*syntax\s*=`),
	regexp.MustCompile(`(?i)^\s*RUN\b.*--mount=`),
	regexp.MustCompile(`(?i)^\s*(RUN|COPY)\b.*<<-?["']?[A-Z]+`),
	regexp.MustCompile(`(?i)^\s*(COPY|ADD)\b.*--link\b`),
	regexp.MustCompile(`(?i)^\s*RUN\b.*--(network|security)=`),
}

// TestDockerfileNeedsNoBuildKit reads the Dockerfile, joining continued
// lines as the builder does, and refuses BuildKit-only syntax.
func TestDockerfileNeedsNoBuildKit(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatalf("ReadFile(Dockerfile): %v", err)
	}
	var instructions []string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") && cur.Len() == 0 {
			instructions = append(instructions, line)
			continue
		}
		if trimmed := strings.TrimRight(line, " \t"); strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		instructions = append(instructions, cur.String())
		cur.Reset()
	}
	froms := 0
	for _, in := range instructions {
		for _, re := range buildKitOnly {
			if re.MatchString(in) {
				t.Errorf("Dockerfile: %q needs BuildKit (%s)", strings.TrimSpace(in), re)
			}
		}
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(in)), "FROM ") {
			froms++
		}
	}
	if froms < 2 {
		t.Errorf("Dockerfile has %d FROM instructions, want the builder and the runtime stages", froms)
	}
}

// pinnedImage is an image reference pinned by digest.
var pinnedImage = regexp.MustCompile(`^([^@:]+(?::\d+)?/[^@:]+|[^@:/]+/[^@:]+):([^@:]+)@sha256:[0-9a-f]{64}$`)

// dockerfileArgs returns the ARG defaults of the Dockerfile at path.
func dockerfileArgs(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", path, err)
	}
	args := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, value, ok := strings.Cut(strings.TrimPrefix(line, "ARG "), "="); ok && strings.HasPrefix(line, "ARG ") {
			args[name] = value
		}
	}
	return args
}

// goLine returns go.mod's go version.
func goLine(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatalf("ReadFile(go.mod): %v", err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// TestDockerfilePinsItsBaseImages: both stages start from an image pinned by
// digest, and the builder's Go is go.mod's, which GOTOOLCHAIN=local needs.
func TestDockerfilePinsItsBaseImages(t *testing.T) {
	t.Parallel()
	args := dockerfileArgs(t, "../Dockerfile")
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if from, ok := strings.CutPrefix(line, "FROM "); ok {
			image := strings.Fields(from)[0]
			if image != "${BUILDER_IMAGE}" && image != "${RUNTIME_IMAGE}" {
				t.Errorf("Dockerfile: FROM %s, want ${BUILDER_IMAGE} or ${RUNTIME_IMAGE}, pinned by digest", image)
			}
		}
	}
	for _, name := range []string{"BUILDER_IMAGE", "RUNTIME_IMAGE"} {
		if !pinnedImage.MatchString(args[name]) {
			t.Errorf("Dockerfile: ARG %s=%q, want repository:tag@sha256:<digest>", name, args[name])
		}
	}
	if m := pinnedImage.FindStringSubmatch(args["BUILDER_IMAGE"]); m != nil && (!strings.HasSuffix(m[1], "/golang") || m[2] != goLine(t)) {
		t.Errorf("Dockerfile: builder %s:%s, want golang:%s, go.mod's go line", m[1], m[2], goLine(t))
	}
}

// TestRefreshBaseImages runs scripts/refresh-base-images.sh on a copy of the
// Dockerfile. No registry is reachable from the tests, so a stand-in skopeo
// on PATH answers `skopeo inspect --format {{.Digest}} docker://REF` as the
// real one does, with a digest made from REF; the test checks what the script
// asks for and what it writes.
func TestRefreshBaseImages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dockerfile := filepath.Join(dir, "Dockerfile")
	orig, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dockerfile, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	asked := filepath.Join(dir, "asked")
	skopeo := `#!/bin/sh
[ "$1 $2 $3" = "inspect --format {{.Digest}}" ] || { echo "unexpected: $*" >&2; exit 2; }
echo "$4" >>` + asked + `
case "$4" in *broken*) echo "not a digest"; exit 0;; esac
printf 'sha256:%s\n' "$(printf '%s' "$4" | sha256sum | cut -c1-64)"
`
	if err := os.WriteFile(filepath.Join(bin, "skopeo"), []byte(skopeo), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(env ...string) ([]byte, error) {
		cmd := exec.Command("bash", "../scripts/refresh-base-images.sh")
		cmd.Env = append(os.Environ(), append(env, "DOCKERFILE="+dockerfile, "PATH="+bin+":"+os.Getenv("PATH"))...)
		return cmd.CombinedOutput()
	}
	if out, err := run("RUNTIME_TAG=9.8"); err != nil {
		t.Fatalf("refresh-base-images.sh: %v\n%s", err, out)
	}
	wantAsked := "docker://docker.io/library/golang:" + goLine(t) + "\ndocker://registry.access.redhat.com/ubi9/ubi-minimal:9.8\n"
	if got, _ := os.ReadFile(asked); string(got) != wantAsked {
		t.Errorf("refresh-base-images.sh asked skopeo for\n%s, want\n%s", got, wantAsked)
	}
	args := dockerfileArgs(t, dockerfile)
	for name, ref := range map[string]string{"BUILDER_IMAGE": "docker.io/library/golang:" + goLine(t),
		"RUNTIME_IMAGE": "registry.access.redhat.com/ubi9/ubi-minimal:9.8"} {
		if !strings.HasPrefix(args[name], ref+"@sha256:") || !pinnedImage.MatchString(args[name]) {
			t.Errorf("after refresh-base-images.sh, ARG %s=%q, want %s@sha256:<digest>", name, args[name], ref)
		}
	}
	// A registry answer that is no digest leaves the Dockerfile as it was,
	// though the builder's look-up succeeded with a digest other than the
	// Dockerfile's.
	if err := os.WriteFile(dockerfile, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(dockerfile)
	if out, err := run("RUNTIME_TAG=broken"); err == nil {
		t.Errorf("refresh-base-images.sh with no digest succeeded:\n%s", out)
	}
	if after, _ := os.ReadFile(dockerfile); string(after) != string(before) {
		t.Errorf("a failed refresh changed the Dockerfile")
	}
}
