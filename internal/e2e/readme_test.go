package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// docStep is one command of a doc's sh block and the output the doc shows
// for it, if any.
type docStep struct {
	line    int // of the command's first line in the block
	command string
	want    string // empty: the doc shows no output
}

// docSteps splits a sh block into its commands. A comment right below a
// command (or below its shown output) is that command's output; one
// starting with "#   " continues the line above. Comments after a blank
// line, numbered headings ("# 3. ...") and the "# fleetctl:" variants with
// what follows them are prose, not output.
func docSteps(block string) []docStep {
	var steps []docStep
	heading := regexp.MustCompile(`^# \d+\. `)
	lines := strings.Split(block, "\n")
	inOutput, inVariant := false, false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
			inOutput, inVariant = false, false
		case strings.HasPrefix(line, "#"):
			text := strings.TrimPrefix(line, "#")
			switch {
			case strings.HasPrefix(line, "# fleetctl:") || heading.MatchString(line):
				inOutput, inVariant = false, strings.HasPrefix(line, "# fleetctl:")
			case inVariant:
			case inOutput && strings.HasPrefix(text, "   "):
				steps[len(steps)-1].want += " " + strings.TrimSpace(text)
			case inOutput && steps[len(steps)-1].want == "":
				steps[len(steps)-1].want = strings.TrimSpace(text)
			case inOutput:
				// A second output line of the same command (a table).
				steps[len(steps)-1].want += "\n" + strings.TrimSpace(text)
			}
		default:
			step := docStep{line: i + 1, command: line}
			for strings.HasSuffix(lines[i], "\\") && i+1 < len(lines) {
				i++
				step.command += "\n" + lines[i]
			}
			steps = append(steps, step)
			inOutput, inVariant = true, false
		}
	}
	return steps
}

// matchesDoc reports whether got is what the doc shows as want: the same
// text, whitespace aside, where "…" in want stands for any text.
func matchesDoc(want, got string) bool {
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), "") }
	parts := strings.Split(squeeze(want), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*?") + "$").MatchString(squeeze(got))
}

// shell is one bash process fed a doc's commands one by one, so that each
// command's output and exit status are read apart while the variables and
// functions the doc defines persist from one to the next.
type shell struct {
	t      *testing.T
	stdin  io.WriteCloser
	lines  chan string
	stderr string // the file of the last command's standard error
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &shell{t: t, stdin: stdin, lines: make(chan string, 64), stderr: filepath.Join(dir, ".step-stderr")}
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 1<<20), 1<<20)
		for scanner.Scan() {
			sh.lines <- scanner.Text()
		}
		close(sh.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return sh
}

// run runs command in the shell and returns its output and exit status,
// as a terminal shows them: its standard error, where curl's progress
// meter goes when the output is not a terminal, is kept apart (lastStderr).
// It fails the test when the command does not end within a minute.
func (sh *shell) run(command string) (string, int) {
	sh.t.Helper()
	const marker = "@@fleet-manager-doc-step@@"
	if _, err := fmt.Fprintf(sh.stdin, "{\n%s\n} 2>%q </dev/null; printf '\\n%s%%d\\n' $?\n", command, sh.stderr, marker); err != nil {
		sh.t.Fatalf("writing to the shell: %v", err)
	}
	var out []string
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-sh.lines:
			if !ok {
				sh.t.Fatalf("the shell ended during %q; it printed %q", command, strings.Join(out, "\n"))
			}
			if code, found := strings.CutPrefix(line, marker); found {
				status, err := strconv.Atoi(code)
				if err != nil {
					sh.t.Fatalf("exit status %q: %v", code, err)
				}
				return strings.TrimSuffix(strings.Join(out, "\n"), "\n"), status
			}
			out = append(out, line)
		case <-deadline:
			sh.t.Fatalf("%q did not end within a minute; it printed %q", command, strings.Join(out, "\n"))
		}
	}
}

// lastStderr returns what the last command wrote to its standard error.
func (sh *shell) lastStderr() string {
	data, _ := os.ReadFile(sh.stderr)
	return string(data)
}

// readOnly reports whether a command only reads: a GET with curl, or
// fleetctl's whoami.
func readOnly(command string) bool {
	if strings.Contains(command, "bin/fleetctl whoami") {
		return true
	}
	return strings.HasPrefix(command, "curl ") && !strings.Contains(command, " -X ") && !strings.Contains(command, " -d ")
}

// runDocBlock runs a doc block's commands in sh and checks each exits 0 and
// prints what the doc shows for it.
func runDocBlock(t *testing.T, sh *shell, name, block string) {
	t.Helper()
	steps := docSteps(block)
	shown := 0
	for _, step := range steps {
		if step.want != "" {
			shown++
		}
		var out string
		var status int
		matches := func() bool {
			out, status = sh.run(step.command)
			return status == 0 && (step.want == "" || matchesDoc(step.want, out))
		}
		ok := matches()
		if !ok && readOnly(step.command) {
			// A read the doc shows right after a change: asked again
			// until the answer comes, as a reader who waited a moment
			// longer would see it.
			quiet := gomega.NewGomega(func(string, ...int) {})
			ok = quiet.Eventually(matches).WithTimeout(30 * time.Second).
				WithPolling(200 * time.Millisecond).Should(gomega.BeTrue())
		}
		if !ok {
			t.Fatalf("%s, line %d:\n%s\nexited %d and printed\n%s\nwhere the doc shows\n%s\nits standard error:\n%s",
				name, step.line, step.command, status, out, step.want, sh.lastStderr())
		}
	}
	if shown < 2 {
		t.Fatalf("%s: %d commands with a shown output; the block was not split as expected: %+v", name, shown, steps)
	}
}

// TestREADMEWalkthrough runs the README's "Calling the API" commands and
// its walk-through from registration to deregistration, as they stand,
// against the real binary on a fresh database, with bin/fleet-manager token
// minting for that binary's development key and bin/fleetctl built from
// this tree, and checks that each command succeeds and prints what the
// README shows for it.
func TestREADMEWalkthrough(t *testing.T) {
	fm := startFleetManager(t, hydratest.Start(t))
	dir := docWorkDir(t, fm)
	if err := os.Symlink(buildFleetctl(t), filepath.Join(dir, "bin", "fleetctl")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"))
	sh := startShell(t, dir, env)
	server := fmt.Sprintf("127.0.0.1:%d", fm.api)
	for _, marker := range []string{"$B/current_user", "$B/admin/hubs"} {
		block := strings.ReplaceAll(docBlock(t, "../../README.md", marker), "localhost:8000", server)
		runDocBlock(t, sh, "README.md's block with "+marker, block)
	}
}
