//go:build !linux

package childproc

import "os/exec"

// setDeathSignal does nothing where there is no parent-death signal: Main
// stops the children.
func setDeathSignal(*exec.Cmd) {}
