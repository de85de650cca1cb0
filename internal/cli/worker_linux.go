//go:build linux

package cli

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// setJobSysProcAttr runs a job's CMD in a process group of its own, so that stopping it reaches
// what it started too (and a Ctrl-C typed at the worker's terminal reaches only the worker,
// which shuts down gracefully), and has the kernel SIGKILL CMD when the worker dies, even of
// SIGKILL: otherwise the job's lease would expire, the job would be retried, and the retry would
// overlap with the orphaned CMD. As for 'baton run' (see setSysProcAttr), Pdeathsig fires when
// the thread that started CMD exits, which the Go runtime does not do to baton's threads.
func setJobSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalJobGroup sends sig to CMD's process group.
func signalJobGroup(cmd *exec.Cmd, sig syscall.Signal) {
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// awaitExitNoReap blocks until the process pid has exited, without reaping it (waitid with
// WNOWAIT), and reports whether that worked.
func awaitExitNoReap(pid int) bool {
	const (
		pPID    = 1          // P_PID
		wExited = 0x4        // WEXITED
		wNoWait = 0x01000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
			wExited|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}
