package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

const runUsage = `Usage: baton run --lock KEY [--ttl 15s] [--wait 1m | --no-wait] [--holder NAME] [--grace 5s] [--cooldown D] -- CMD [ARGS...]

Run CMD while holding the lock KEY on a baton server: one CMD at a time per KEY, across
machines. The lease is renewed in the background (every TTL/3) for as long as CMD runs, and
released when CMD exits.

- If KEY is held, wait up to --wait for it (the server wakes the wait as soon as KEY is
  released); with --no-wait, fail at once. While waiting, an unreachable server (a restart, a
  network fault) is retried with backoff until --wait ends. However long the wait, the lease
  is fully usable once granted.
- CMD gets baton's stdin, stdout and stderr, and these environment variables:
    BATON_LOCK_KEY       the key
    BATON_LEASE_ID       the lease ID
    BATON_FENCING_TOKEN  the fencing token: pass it to the resource, which should reject
                         writes with a token lower than one it has seen
- SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to baton are passed on to CMD.
  (SIGINT and SIGQUIT typed at a terminal reach CMD directly and are not passed on again.)
- If renews fail (the server is unreachable), CMD gets SIGTERM --grace before the lease's
  local deadline and SIGKILL at that deadline, which comes before the server could give the
  lock to anyone else; baton exits with code 76. --grace is at most a third of --ttl (default:
  10s or a third of --ttl, whichever is less). If the server says the lease is gone
  (force-released, or expired while baton was frozen), CMD gets SIGTERM at once and SIGKILL
  after --grace: another holder may have started, and only the fencing token protects the
  resource. The lease is released only after CMD has exited, never while it may still run.
- On Linux, CMD is killed if baton itself is killed, even by SIGKILL.
- --cooldown D keeps KEY resting for D after CMD exits and the lease is released: until then
  every other run of KEY is refused ("resting (cooldown) for another 41s"; exit code 75 with
  --no-wait, or it waits, within --wait). An operator can end the rest early with
  'baton locks force-release KEY --reason TEXT'. A lease that is lost instead rests for its
  lock-delay, not for D.

Examples:
  baton run --lock terraform/prod --wait 10m -- terraform apply -auto-approve
  baton run --lock nightly-report --no-wait -- ./report.sh
  baton run --lock node/node-1 --no-wait --cooldown 10m -- ./drain-and-reboot.sh node-1

Exit codes: CMD's exit code (128+N if it died of signal N); 1 error (server unreachable,
unexpected); 2 usage error; 75 lock busy (held or in cooldown past --wait); 76 lease lost while
CMD ran; 77 unauthorized or forbidden; 126 CMD cannot be run; 127 CMD not found;
128+N when baton got signal N while waiting for the lock.
`

// releaseTimeout bounds the release after CMD exits.
const releaseTimeout = 10 * time.Second

func runCommand(args []string, g *globals, stdin io.Reader, stdout, stderr io.Writer) int {
	if _, isFile := stderr.(*os.File); !isFile {
		// The keepalive's warnings and CMD's output (copied by os/exec for a writer that is not
		// a file) would write to stderr concurrently.
		stderr = &lockedWriter{w: stderr}
	}
	c := newCommand("baton run", runUsage, stdout, stderr)
	g.register(c.fs, false)
	key := c.fs.String("lock", "", "the lock `KEY` (required)")
	ttl := c.fs.Duration("ttl", baton.DefaultTTL, "lease `TTL`, 1s to 24h; renewed every TTL/3")
	wait := c.fs.Duration("wait", time.Minute, "wait up to `duration` for the lock")
	noWait := c.fs.Bool("no-wait", false, "fail at once (exit code 75) if the lock is held")
	holder := c.fs.String("holder", "", "holder `name`, e.g. a job ID, unique to this run: runs with the same holder share the lock (default: host:pid:random)")
	grace := c.fs.Duration("grace", 0, "how long CMD has between SIGTERM and SIGKILL when the lease is failing; at most TTL/3 (default: 10s or TTL/3, whichever is less)")
	cooldown := c.fs.Duration("cooldown", 0, "keep KEY resting for `duration` after the lease is released, 0 to 24h")
	cmdArgs, code, ok := c.parseUntilCommand(args)
	if !ok {
		return code
	}
	waitSet, graceSet := false, false
	c.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "wait":
			waitSet = true
		case "grace":
			graceSet = true
		}
	})
	switch {
	case len(cmdArgs) == 0:
		return c.usageError("missing CMD (baton run --lock KEY -- CMD [ARGS...])")
	case *key == "":
		return c.usageError("--lock is required")
	case *noWait && waitSet:
		return c.usageError("--wait and --no-wait exclude each other")
	case *wait < 0:
		return c.usageError("--wait must not be negative")
	case *grace < 0:
		return c.usageError("--grace must not be negative")
	case *cooldown < 0 || *cooldown > store.MaxPause:
		return c.usageError("--cooldown must be between 0 and %s (got %s)", store.MaxPause, *cooldown)
	}
	if err := store.ValidateKey(*key); err != nil {
		return c.fail(g, err)
	}
	if err := store.ValidateTTL(*ttl); err != nil {
		return c.fail(g, err)
	}
	if *holder != "" {
		if err := store.ValidateHolder(*holder); err != nil {
			return c.fail(g, err)
		}
	}
	if *noWait {
		*wait = 0
	}
	// CMD must be dead by the lease's local deadline, which a renew pushes to about TTL after
	// it; renews come every TTL/3, so a grace of TTL/3 leaves a third of the TTL for a renew to
	// succeed before CMD is told to stop.
	maxGrace := *ttl / 3
	switch {
	case !graceSet:
		*grace = min(10*time.Second, maxGrace)
	case *grace > maxGrace:
		return c.usageError("--grace %s is longer than a third of --ttl (%s): CMD must be dead before the lease could pass to another holder; raise --ttl or lower --grace", *grace, maxGrace)
	}

	// Resolve CMD before taking the lock, so that a typo does not hold it.
	if _, err := exec.LookPath(cmdArgs[0]); err != nil {
		fmt.Fprintf(stderr, "baton run: %v\n", err)
		if errors.Is(err, os.ErrPermission) {
			return exitNoExec
		}
		return exitNotExist
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)

	// Signals: from here on they are ours to handle (and, once CMD runs, to pass on).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals()...)
	defer signal.Stop(sigs)

	st, err := g.store()
	if err != nil {
		return c.usageError("%v", err)
	}
	defer st.Close()
	locker, err := baton.NewLocker(st, &baton.Config{
		TTL:    *ttl,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return c.fail(g, err)
	}
	// CMD is told to stop --grace before the lease's local deadline when renews fail, so that
	// it is dead by then (superviseRun).
	opts := []baton.Option{baton.WithTTL(*ttl), baton.WithCooldown(*cooldown), baton.WithStopGrace(*grace)}
	if *holder != "" {
		opts = append(opts, baton.WithHolder(*holder))
	}

	lease, code := acquireForRun(c, g, locker, *key, *wait, opts, sigs)
	if lease == nil {
		return code
	}

	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = append(os.Environ(),
		"BATON_LOCK_KEY="+lease.Key,
		"BATON_LEASE_ID="+lease.ID,
		"BATON_FENCING_TOKEN="+strconv.FormatUint(lease.Token, 10))
	// Only used when baton's own stdout or stderr is not a file (then os/exec copies CMD's
	// output through a pipe): do not wait forever for a grandchild that keeps the pipe open.
	cmd.WaitDelay = time.Second
	setSysProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		releaseForRun(lease, stderr)
		fmt.Fprintf(stderr, "baton run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotExist
		}
		return exitNoExec
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lost := superviseRun(cmd, lease, *grace, exited, sigs, stderr)
	// A loss in the instant CMD exited still counts: the work may have overlapped with the next
	// holder's.
	if !lost && errors.Is(lease.Err(), baton.ErrLeaseLost) {
		lost = true
		fmt.Fprintf(stderr, "baton run: lease on %q lost while CMD ran (%s)\n", lease.Key, lostReason(lease.Err()))
	}
	status := exitStatus(cmd.ProcessState)
	if lost {
		// CMD has exited. Usually refused (the key was taken or force-released); if the loss was
		// only the local deadline, this frees the key for the next holder.
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		_ = lease.Release(ctx)
		cancel()
		fmt.Fprintf(stderr, "baton run: CMD exited with status %d; exiting with %d (lease lost)\n", status, exitLeaseLost)
		return exitLeaseLost
	}
	releaseForRun(lease, stderr)
	return status
}

// acquireForRun takes the lock for baton run, waiting up to wait. A signal other than SIGUSR1
// and SIGUSR2 while waiting gives up (exit code 128+N). It returns the lease, or nil and the
// exit code (the error already printed).
func acquireForRun(c *command, g *globals, locker *baton.Locker, key string, wait time.Duration, opts []baton.Option, sigs <-chan os.Signal) (*baton.Lease, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		lease *baton.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		deadline := time.Now().Add(wait)
		tctx, tcancel := context.WithTimeout(ctx, requestTimeout)
		l, err := locker.TryAcquire(tctx, key, opts...)
		tcancel()
		if wait > 0 && err != nil {
			// Held or resting: wait for it. Anything else is retried within the wait too if it
			// is transient (the server restarting); Acquire gives up at once on bad input or
			// refused credentials.
			if isBusy(err) {
				fmt.Fprintf(c.stderr, "baton run: %s; waiting up to %s\n", describe(g, err), wait)
			}
			busy := err
			wctx, wcancel := context.WithDeadline(ctx, deadline)
			l, err = locker.Acquire(wctx, key, opts...)
			wcancel()
			if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !isBusy(err) && isBusy(busy) {
				// The wait ran out before the server answered an attempt (the first one can
				// take much of a short wait on a loaded machine): the lock was last seen busy,
				// which is the answer (exit 75), not a server that did not answer.
				err = busy
			}
		}
		done <- result{l, err}
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return nil, c.fail(g, r.err)
			}
			return r.lease, exitOK
		case sig := <-sigs:
			if isUserSignal(sig) {
				continue
			}
			cancel()
			if r := <-done; r.lease != nil {
				releaseForRun(r.lease, c.stderr)
			}
			fmt.Fprintf(c.stderr, "baton run: %v while waiting for the lock %q; giving up\n", sig, key)
			return nil, 128 + signalNumber(sig)
		}
	}
}

// isBusy says whether err says the lock is held or resting.
func isBusy(err error) bool {
	return errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrCooldown)
}

// releaseForRun releases the lease with a fresh, bounded context; a failure is reported (the
// lease then expires at its TTL) but does not change the exit code.
func releaseForRun(lease *baton.Lease, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil {
		fmt.Fprintf(stderr, "baton run: releasing %q: %v (the lease will expire within its TTL)\n", lease.Key, err)
	}
}

// lostReason says why a lease was lost, from Lease.Err.
func lostReason(err error) string {
	if errors.Is(err, store.ErrNotHeld) {
		return "the server says it is no longer held: it expired, was taken over or force-released"
	}
	return fmt.Sprintf("%v; the server may have been unreachable", err)
}

// exitStatus is CMD's exit code, or 128+N if it died of signal N, as shells report it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// lockedWriter serialises writes to a writer shared by goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
