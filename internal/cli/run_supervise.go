package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/batonhq/baton"
)

// superviseRun waits for CMD to exit, passing signals on, and stops it in time when the lease
// fails. It reports whether the lease was lost (or given up) while CMD ran.
//
// The lease's local deadline comes before the server could give the key to anyone else. When
// renews fail, the lease's StopContext ends grace before that deadline (the lease was taken
// with baton.WithStopGrace(grace)): CMD then gets SIGTERM, and SIGKILL grace later, at the
// deadline, so that it is dead by then, as 'baton worker' stops its CMDs. When the server says
// the lease is gone (ErrNotHeld: force-released, or expired while this process was frozen),
// another holder may already run: CMD gets SIGTERM at once and SIGKILL after grace. Nothing
// here releases the lease: the caller does, after CMD exited.
func superviseRun(cmd *exec.Cmd, lease *baton.Lease, grace time.Duration, exited <-chan error, sigs <-chan os.Signal, stderr io.Writer) (lost bool) {
	leaseDone, stopping := lease.Done(), lease.StopContext().Done()
	var killTimer *time.Timer
	var kill <-chan time.Time
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
	terminated, killed := false, false
	terminate := func() {
		terminated = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		killTimer = time.NewTimer(grace)
		kill = killTimer.C
	}
	sigkill := func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
		}
	}
	for {
		select {
		case <-exited:
			return lost
		case sig := <-sigs:
			if deliveredByTerminal(sig) {
				continue // CMD, in our process group, got it from the terminal too
			}
			_ = cmd.Process.Signal(sig)
		case <-stopping:
			stopping = nil
			if lease.Err() != nil || terminated {
				continue // lost or released: leaseDone handles it
			}
			lost = true
			fmt.Fprintf(stderr, "baton run: no renew of the lease on %q succeeded in time (the server may be unreachable); its local deadline is in %s: sending CMD SIGTERM, SIGKILL at the deadline\n",
				lease.Key, time.Until(lease.Deadline()).Round(time.Millisecond))
			terminate()
		case <-leaseDone:
			leaseDone = nil
			lost = true
			err := lease.Err()
			if errors.Is(err, baton.ErrNotHeld) && !terminated {
				fmt.Fprintf(stderr, "baton run: lease on %q lost while CMD ran (%s): sending CMD SIGTERM, SIGKILL in %s\n",
					lease.Key, lostReason(err), grace)
				terminate()
				continue
			}
			if !errors.Is(err, baton.ErrNotHeld) {
				// The local deadline: CMD was told to stop grace ago and must be dead now.
				fmt.Fprintf(stderr, "baton run: lease on %q lost while CMD ran (%s): sending CMD SIGKILL\n", lease.Key, lostReason(err))
				sigkill()
			}
		case <-kill:
			kill = nil
			fmt.Fprintf(stderr, "baton run: CMD still running after SIGTERM: sending SIGKILL\n")
			sigkill()
		}
	}
}
