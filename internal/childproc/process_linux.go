package childproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the child when the test binary dies, so
// a test killed by its timeout leaves no child behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
