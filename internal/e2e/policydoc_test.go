package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// docBlock returns the ```sh block of the markdown file path that contains
// marker.
func docBlock(t *testing.T, path, marker string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(data), "```sh\n")[1:] {
		block, _, ok := strings.Cut(part, "\n```\n")
		if ok && strings.Contains(block, marker) {
			return block + "\n"
		}
	}
	t.Fatalf("%s has no sh block with %q", path, marker)
	return ""
}

// docWorkDir checks that the tools a doc's commands use are there and
// returns a folder to run them in, as from the repository's root after
// make run: its bin/fleet-manager is the binary under test, whose token
// command signs with the key fm's serve trusts, for the audience and with
// the agent claim it requires.
func docWorkDir(t *testing.T, fm *fleetManager) string {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the doc's commands need %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/usr/bin/env bash\nexec %q \"$@\" --auth-dev-key-dir=%q --auth-audience=%q --auth-agent-claims=client_id\n",
		fleetManagerBinary, fm.keyDir, audience)
	if err := os.WriteFile(filepath.Join(dir, "bin", "fleet-manager"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// expectedOutputs returns the outputs a block shows: its comment lines that
// hold a JSON value or a status code, without the "# ".
func expectedOutputs(block string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		want, ok := strings.CutPrefix(line, "# ")
		if ok && want != "" && (strings.ContainsAny(want[:1], "[{") || strings.Trim(want, "0123456789") == "") {
			out = append(out, want)
		}
	}
	return out
}

// TestPolicyDocExample runs the example of docs/policies.md ("Trying it
// locally") as it stands, against the real binary on a fresh database, with
// bin/fleet-manager token minting for that binary's development key, and
// checks that it prints the outputs the doc shows, in order.
func TestPolicyDocExample(t *testing.T) {
	fm := startFleetManager(t, hydratest.Start(t))
	block := docBlock(t, "../../docs/policies.md", "agent-hubs/$HUB/inventory")
	want := expectedOutputs(block)
	if len(want) < 5 {
		t.Fatalf("the doc's example shows %d outputs: %q", len(want), want)
	}
	dir := docWorkDir(t, fm)
	script := strings.ReplaceAll(block, "localhost:8000", fmt.Sprintf("127.0.0.1:%d", fm.api))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = exit.Stderr
		}
		t.Fatalf("the doc's example failed: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, out, stderr, fm.Logs())
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	next := 0
	for _, line := range got {
		if next < len(want) && line == want[next] {
			next++
		}
	}
	if next < len(want) {
		t.Errorf("the doc's example printed\n%s\nwhich lacks, in order, the doc's output %q (and what follows)", out, want[next])
	}
}
