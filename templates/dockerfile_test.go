package templates_test

import (
	"os"
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
