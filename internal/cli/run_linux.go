//go:build linux

package cli

import (
	"os"
	"os/exec"
	"syscall"
	"unsafe"
)

// forwardedSignals are the signals baton run passes on to CMD.
func forwardedSignals() []os.Signal {
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
}

// isUserSignal reports SIGUSR1 and SIGUSR2, which do not make a waiting baton run give up.
func isUserSignal(sig os.Signal) bool { return sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 }

// setSysProcAttr makes the kernel SIGKILL CMD when baton run dies, whatever kills it. Without
// this, a baton run killed with SIGKILL (which it cannot catch: the OOM killer, kill -9, a CI
// runner's timeout) would leave CMD running with nobody renewing its lease; the lease would
// expire and the next holder would start while CMD still works on the resource.
//
// Pdeathsig fires when the OS thread that started CMD exits, not the process. The Go runtime
// never ends its threads, except one whose goroutine exits while locked to it
// (runtime.LockOSThread), which baton never does.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// deliveredByTerminal reports whether sig is SIGINT or SIGQUIT while baton's process group is
// the foreground group of its controlling terminal. Then the signal most likely came from the
// terminal (Ctrl-C, Ctrl-\), which sends it to the whole foreground group, CMD included:
// passing it on too would deliver it twice, and some programs treat a second SIGINT as "abort
// now" (terraform does). The cost: a SIGINT sent with kill(1) to a foreground baton run is not
// passed on.
func deliveredByTerminal(sig os.Signal) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		return false
	}
	tty, err := os.Open("/dev/tty") // fails without a controlling terminal (CI, services)
	if err != nil {
		return false
	}
	defer tty.Close()
	var fg int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&fg))); errno != 0 {
		return false
	}
	return int(fg) == syscall.Getpgrp()
}
