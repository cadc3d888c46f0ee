//go:build !linux

package main

import "os/exec"

// stopWithParent does nothing where there is no parent death signal.
func stopWithParent(*exec.Cmd) {}
