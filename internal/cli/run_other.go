//go:build !linux

package cli

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// userSignals are SIGUSR1 and SIGUSR2 where they exist; package syscall names them only per
// system, so they are numbered here.
func userSignals() []os.Signal {
	switch runtime.GOOS {
	case "darwin", "ios", "freebsd", "netbsd", "openbsd", "dragonfly":
		return []os.Signal{syscall.Signal(30), syscall.Signal(31)}
	case "solaris", "illumos", "aix":
		return []os.Signal{syscall.Signal(16), syscall.Signal(17)}
	default:
		return nil
	}
}

// forwardedSignals are the signals baton run passes on to CMD.
func forwardedSignals() []os.Signal {
	return append([]os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}, userSignals()...)
}

// isUserSignal reports SIGUSR1 and SIGUSR2, which do not make a waiting baton run give up.
func isUserSignal(sig os.Signal) bool {
	for _, s := range userSignals() {
		if sig == s {
			return true
		}
	}
	return false
}

// setSysProcAttr does nothing: only Linux can have the kernel kill CMD when baton run dies
// (Pdeathsig). Elsewhere a baton run killed with SIGKILL leaves CMD running without keepalive,
// and the next holder may start once the lease expires.
func setSysProcAttr(*exec.Cmd) {}

// deliveredByTerminal is false: every signal is passed on (a Ctrl-C at a terminal reaches CMD
// twice).
func deliveredByTerminal(os.Signal) bool { return false }
