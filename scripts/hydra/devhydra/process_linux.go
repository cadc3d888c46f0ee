package main

import (
	"os/exec"
	"syscall"
)

// stopWithParent has the kernel stop the command when this process dies, so
// that a killed devhydra leaves no serve behind (Hydra has the same).
func stopWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
