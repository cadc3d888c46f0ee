package hubtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

func TestMissingBinaryNamesTheMakeTarget(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	_, err := findBinaries()
	if err == nil || !strings.Contains(err.Error(), "make test/binaries") || !strings.Contains(err.Error(), dir) {
		t.Errorf("findBinaries() with an empty %s = %v, want an error naming make test/binaries and %s", BinDirEnv, err, dir)
	}
}

// TestWithParentDiesWithItsParent: a program started through withParent's
// wrapper is killed when the process that started it dies without stopping
// it, as a test binary killed by its timeout does.
func TestWithParentDiesWithItsParent(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	wrapper := withParent(t.TempDir(), sleep)
	if wrapper == sleep {
		t.Fatalf("withParent(%s) = the binary itself, want a wrapper (setpriv, of util-linux, missing?)", sleep)
	}
	parent := exec.Command("sh", "-c", shellQuote(wrapper)+" 600 & echo $!; wait")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(bufio.NewReader(out), &pid); err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	g := gomega.NewWithT(t)
	// Once the wrapper has become sleep, the death signal is set. The
	// executable tells, not the command name: the wrapper script bears
	// the binary's name while the shell runs it, before setpriv.
	sleepExe, err := filepath.EvalSymlinks(sleep)
	if err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() string {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return exe
	}).WithTimeout(10*time.Second).Should(gomega.Equal(sleepExe), "the wrapper of pid %d execs sleep", pid)

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	g.Eventually(func() bool { return running(pid) }).WithTimeout(10*time.Second).Should(gomega.BeFalse(),
		"pid %d (sleep) killed with its parent", pid)
}

// running reports whether pid is alive; a zombie nobody reaped yet is not.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, fields, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(fields, "Z") && !strings.HasPrefix(fields, "X")
}
