//go:build chaosbug

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// This file is built only with the tag chaosbug, for the fault harness's broken-variant runs
// (e2e/chaos TestChaosBugs): BATON_CHAOS_BUG brings back a bug 'baton run' had, so that the
// harness can show its checks catch it. Release builds never carry it.
//
//   - longwait: the lease's local deadline is measured from the start of the wait for the lock
//     instead of from the grant, and at that deadline the lease is let go (released on the
//     server) while CMD only then gets SIGTERM (SIGKILL --grace later), as the library and
//     'baton run' once did. After a wait longer than the TTL the lease is let go at once, while
//     CMD runs.
//   - earlyrelease: the lease is released on the server as soon as CMD has started, while CMD
//     still runs (this process learns it at its next renew, refused, and then stops CMD).
//
// Both release through the store directly, as the old code did, so the lease object here goes
// on as if it held the lease until a renew is refused.

// chaosBugAfterStart runs right after CMD started under lease, granted after a wait that
// began at waitStart. stop ends what it started, once CMD has exited.
func chaosBugAfterStart(st store.Store, lease *baton.Lease, waitStart time.Time, grace time.Duration, cmd *exec.Cmd, stderr io.Writer) (stop func()) {
	letGo := func(why string) {
		fmt.Fprintf(stderr, "baton run: chaos bug %s: releasing the lease while CMD runs\n", why)
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_, _ = st.Release(ctx, &store.ReleaseParams{Key: lease.Key, LeaseID: lease.ID})
	}
	switch os.Getenv("BATON_CHAOS_BUG") {
	case "earlyrelease":
		letGo("earlyrelease")
	case "longwait":
		// The validity left at the grant, counted from the start of the wait.
		deadline := waitStart.Add(time.Until(lease.Deadline()))
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
				return
			case <-time.After(time.Until(deadline)):
			}
			letGo("longwait (its local deadline, counted from the start of the wait, passed)")
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(grace):
				_ = cmd.Process.Kill()
			}
		}()
		return func() { close(done) }
	}
	return func() {}
}
