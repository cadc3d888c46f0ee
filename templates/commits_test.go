package templates_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCommitSubjects runs scripts/check-commit-subjects.sh in a
// repository of its own: a long subject before the commit that adds the
// script is history and passes; one after it fails, naming the commit.
func TestCheckCommitSubjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script, err := os.ReadFile("../scripts/check-commit-subjects.sh")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := func(subject string) string {
		t.Helper()
		git("commit", "-q", "--allow-empty", "-m", subject)
		return git("rev-parse", "HEAD")
	}
	run := func() (string, error) {
		cmd := exec.Command("bash", "scripts/check-commit-subjects.sh")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	git("init", "-q")
	commit("An old commit whose subject runs past the seventy-two characters of the convention")
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "check-commit-subjects.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git("add", "scripts")
	commit("Check commit subjects")
	commit(strings.Repeat("x", 72))
	if out, err := run(); err != nil {
		t.Fatalf("check-commit-subjects.sh with subjects of at most 72 after it: %v\n%s", err, out)
	}
	long := commit(strings.Repeat("y", 73))
	out, err := run()
	if err == nil || !strings.Contains(out, long[:12]) || !strings.Contains(out, "73 characters") {
		t.Errorf("check-commit-subjects.sh with a 73-character subject = %v\n%s, want a failure naming %s", err, out, long[:12])
	}
}
