//go:build !linux

package cli

import (
	"os/exec"
	"syscall"
)

// setJobSysProcAttr does nothing: off Linux, a job's CMD runs in the worker's process group and
// is not killed when the worker dies (no Pdeathsig); rely on fencing tokens.
func setJobSysProcAttr(*exec.Cmd) {}

// signalJobGroup sends sig to CMD only.
func signalJobGroup(cmd *exec.Cmd, sig syscall.Signal) {
	_ = cmd.Process.Signal(sig)
}

// awaitExitNoReap is not available: CMD's exit is seen when it is reaped.
func awaitExitNoReap(int) bool { return false }
