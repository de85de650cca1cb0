package cli

import (
	"context"
	"errors"
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

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// releaseTimeout bounds the release after CMD exits.
const releaseTimeout = 10 * time.Second

func (a *app) runCommand() *cobra.Command {
	var holder, reason string
	locks, limits := &listFlag{}, &listFlag{}
	var ttl, wait, grace, cooldown time.Duration
	var first, shared bool
	var noWait bool
	cmd := a.command(&cobra.Command{
		Use:   "run --lock KEY [--lock KEY2...] [--shared] [--limit NAME...] [--ttl 15s] [--wait 1m | --no-wait] [--holder NAME] [--grace 5s] [--cooldown D] -- CMD [ARGS...]",
		Short: "run CMD while holding the lock KEY",
		Long: `Run CMD while holding the lock KEY on a baton server: one CMD at a time per KEY, across
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
    BATON_FENCING_MODE   "shared" under --shared (unset otherwise): pass it too, so that
                         the resource judges the token as a shared holder's
    TRACEPARENT          the W3C trace context of the run's span (in the trace of baton's
                         own TRACEPARENT, if set): a CMD that traces continues it. Spans
                         are exported when OTEL_EXPORTER_OTLP_ENDPOINT is set
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
- Beyond one key (SQLite and PostgreSQL stores; others refuse, exit code 1):
    --lock KEY2 (repeated)  hold every KEY at once, all or nothing, under one fencing token;
                            runs naming overlapping keys in any order never deadlock
    --shared                hold the keys shared: with other --shared runs, never with an
                            exclusive one (a waiting exclusive run stops later shared ones)
    --limit NAME (repeated) also take one unit of the limit NAME ('baton limits set NAME N'):
                            at most N runs hold it at once, the others wait in line
  With --limit and no --lock, KEY is the first limit's name, held --shared: a counting
  semaphore ('baton run --limit gpu-pool -- train.sh' runs at most N at once).
  BATON_LOCK_KEY is the first KEY.

Examples:
  baton run --lock terraform/prod --wait 10m -- terraform apply -auto-approve
  baton run --lock nightly-report --no-wait -- ./report.sh
  baton run --lock node/node-1 --no-wait --cooldown 10m -- ./drain-and-reboot.sh node-1
  baton run --lock db/orders --lock db/users -- ./migrate.sh
  baton run --limit gpu-pool -- ./train.sh`,
	}, meta{cmdLine: true, exits: []int{exitCmdStatus, exitError, exitUsage, exitBusy, exitLeaseLost, exitAuth,
		exitNoExec, exitNotExist, exitSignalled}})
	a.addGlobalFlags(cmd, false)
	fs := cmd.Flags()
	fs.SetInterspersed(false) // the first argument starts CMD: its flags are its own
	fs.Var(locks, "lock", "the lock `KEY`; repeat to hold several keys at once (required unless --limit)")
	fs.BoolVar(&shared, "shared", false, "hold the keys shared with other --shared runs (exclusive by default)")
	fs.Var(limits, "limit", "also take one unit of the limit `NAME`; repeatable; alone, a semaphore on NAME")
	fs.DurationVar(&ttl, "ttl", baton.DefaultTTL, "lease `TTL`, 1s to 24h; renewed every TTL/3")
	fs.DurationVar(&wait, "wait", time.Minute, "wait up to `duration` for the lock")
	fs.BoolVar(&noWait, "no-wait", false, "fail at once (exit code 75) if the lock is held")
	fs.StringVar(&holder, "holder", "", "holder `name`, e.g. a job ID, unique to this run: runs with the same holder share the lock (default: host:pid:random)")
	fs.DurationVar(&grace, "grace", 0, "how long CMD has between SIGTERM and SIGKILL when the lease is failing; at most TTL/3 (default: 10s or TTL/3, whichever is less)")
	fs.DurationVar(&cooldown, "cooldown", 0, "keep KEY resting for `duration` after the lease is released, 0 to 24h")
	fs.BoolVar(&first, "first", false, "break-glass: go before every waiting lock request and job of KEY (admin only); still waits for the holder; needs --reason")
	fs.StringVar(&reason, "reason", "", "why this run goes --first, recorded in the audit log")
	cmd.RunE = func(cmd *cobra.Command, cmdArgs []string) error {
		stop, err := startTracing("run", a.stderr)
		if err != nil {
			return usagef("%v", err)
		}
		defer stop()
		return a.runLocked(cmdArgs, runFlags{locks: locks.vals, limits: limits.vals, shared: shared, holder: holder, ttl: ttl, wait: wait, grace: grace,
			cooldown: cooldown, noWait: noWait, waitSet: cmd.Flags().Changed("wait"), graceSet: cmd.Flags().Changed("grace"),
			first: first, reason: reason})
	}
	return cmd
}

// runFlags are the settings of baton run.
type runFlags struct {
	locks, limits              []string
	shared                     bool
	key, holder                string
	ttl, wait, grace, cooldown time.Duration
	noWait, waitSet, graceSet  bool
	first                      bool
	reason                     string
}

// runLocked is baton run: CMD (cmdArgs) under the lock. Its error is CMD's exit status
// (cmdExit) when CMD ran.
func (a *app) runLocked(cmdArgs []string, f runFlags) (err error) {
	stderr := a.stderr
	if len(f.locks) == 0 && len(f.limits) > 0 {
		// A semaphore: the limit's own name as the key, held shared by every run.
		f.locks, f.shared = f.limits[:1], true
	}
	if len(f.locks) > 0 {
		f.key = f.locks[0]
	}
	switch {
	case len(cmdArgs) == 0:
		return usagef("missing CMD (baton run --lock KEY -- CMD [ARGS...])")
	case f.key == "":
		return usagef("--lock is required (or --limit NAME alone, a semaphore on NAME)")
	case f.noWait && f.waitSet:
		return usagef("--wait and --no-wait exclude each other")
	case f.wait < 0:
		return usagef("--wait must not be negative")
	case f.grace < 0:
		return usagef("--grace must not be negative")
	case f.cooldown < 0 || f.cooldown > store.MaxRest:
		return usagef("--cooldown must be between 0 and %s (got %s)", store.MaxRest, f.cooldown)
	case f.first && f.reason == "":
		return usagef("--first needs --reason TEXT: a break-glass run is audited")
	case !f.first && f.reason != "":
		return usagef("--reason is for --first")
	}
	if err := store.ValidateKey(f.key); err != nil {
		return err
	}
	if err := store.ValidateTTL(f.ttl); err != nil {
		return err
	}
	if f.holder != "" {
		if err := store.ValidateHolder(f.holder); err != nil {
			return err
		}
	}
	if f.noWait {
		f.wait = 0
	}
	// CMD must be dead by the lease's local deadline, which a renew pushes to about TTL after
	// it; renews come every TTL/3, so a grace of TTL/3 leaves a third of the TTL for a renew to
	// succeed before CMD is told to stop.
	maxGrace := f.ttl / 3
	switch {
	case !f.graceSet:
		f.grace = min(10*time.Second, maxGrace)
	case f.grace > maxGrace:
		return usagef("--grace %s is longer than a third of --ttl (%s): CMD must be dead before the lease could pass to another holder; raise --ttl or lower --grace", f.grace, maxGrace)
	}

	// Resolve CMD before taking the lock, so that a typo does not hold it.
	if _, err := exec.LookPath(cmdArgs[0]); err != nil {
		return &cmdNotRunnable{err}
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)

	// Signals: from here on they are ours to handle (and, once CMD runs, to pass on).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals()...)
	defer signal.Stop(sigs)

	st, err := a.g.store()
	if err != nil {
		return usagef("%v", err)
	}
	defer st.Close()
	locker, err := baton.NewLocker(st, &baton.Config{
		TTL:    f.ttl,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	// CMD is told to stop --grace before the lease's local deadline when renews fail, so that
	// it is dead by then (superviseRun).
	opts := []baton.Option{baton.WithTTL(f.ttl), baton.WithCooldown(f.cooldown), baton.WithStopGrace(f.grace)}
	if f.first {
		opts = append(opts, baton.WithFirst(f.reason))
	}
	if f.holder != "" {
		opts = append(opts, baton.WithHolder(f.holder))
	}
	if f.shared {
		opts = append(opts, baton.WithShared())
	}
	if len(f.locks) > 1 {
		opts = append(opts, baton.WithResources(f.locks[1:]...))
	}
	if len(f.limits) > 0 {
		opts = append(opts, baton.WithLimits(f.limits...))
	}

	// The run's span: acquire, CMD and release, in the trace of baton's own TRACEPARENT if it
	// has one; CMD gets it as TRACEPARENT.
	ctx, span := cliTracer.Start(baton.ContextWithTraceParent(context.Background(), os.Getenv("TRACEPARENT")), "baton.run",
		trace.WithAttributes(attribute.String("baton.key", f.key)))
	defer func() { endRunSpan(span, err) }()

	waitStart := time.Now()
	lease, err := a.acquireForRun(ctx, locker, f.key, f.wait, opts, sigs)
	if err != nil {
		return err
	}

	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, stderr
	cmd.Env = append(os.Environ(),
		"BATON_LOCK_KEY="+lease.Key,
		"BATON_LEASE_ID="+lease.ID,
		"BATON_FENCING_TOKEN="+strconv.FormatUint(lease.Token, 10))
	cmd.Env = append(cmd.Env, holdsEnv(lease.Resources, lease.Limits, lease.Slots)...)
	if lease.Shared {
		cmd.Env = append(cmd.Env, fencingModeShared)
	}
	if tp := baton.TraceParent(ctx); tp != "" {
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tp)
	}
	// Only used when baton's own stdout or stderr is not a file (then os/exec copies CMD's
	// output through a pipe): do not wait forever for a grandchild that keeps the pipe open.
	cmd.WaitDelay = time.Second
	setSysProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		releaseForRun(lease, stderr)
		return &cmdNotRunnable{err}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	stopBug := chaosBugAfterStart(st, lease, waitStart, f.grace, cmd, stderr)
	lost := superviseRun(cmd, lease, f.grace, exited, sigs, stderr)
	stopBug()
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
		return explain(baton.ErrLeaseLost, "CMD exited with status %d; exiting with %d (lease lost)", status, exitLeaseLost)
	}
	releaseForRunCtx(ctx, lease, stderr)
	if status != 0 {
		return cmdExit(status)
	}
	return nil
}

// acquireForRun takes the lock for baton run, waiting up to wait. A signal other than SIGUSR1
// and SIGUSR2 while waiting gives up (exit code 128+N).
func (a *app) acquireForRun(parent context.Context, locker *baton.Locker, key string, wait time.Duration, opts []baton.Option, sigs <-chan os.Signal) (*baton.Lease, error) {
	ctx, cancel := context.WithCancel(parent)
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
				fmt.Fprintf(a.stderr, "baton run: %s; waiting up to %s\n", describe(a.g, err), wait)
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
			return r.lease, r.err
		case sig := <-sigs:
			if isUserSignal(sig) {
				continue
			}
			cancel()
			if r := <-done; r.lease != nil {
				releaseForRun(r.lease, a.stderr)
			}
			return nil, &signalled{sig: sig, msg: fmt.Sprintf("%v while waiting for the lock %q; giving up", sig, key)}
		}
	}
}

// isBusy says whether err says the lock is held or resting.
func isBusy(err error) bool {
	return errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting)
}

// releaseForRun releases the lease with a fresh, bounded context; a failure is reported (the
// lease then expires at its TTL) but does not change the exit code.
func releaseForRun(lease *baton.Lease, stderr io.Writer) {
	releaseForRunCtx(context.Background(), lease, stderr)
}

// releaseForRunCtx is releaseForRun with the release span a child of parent's.
func releaseForRunCtx(parent context.Context, lease *baton.Lease, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), releaseTimeout)
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

// endRunSpan ends baton run's span; err is runLocked's (CMD's exit status when it ran).
func endRunSpan(sp trace.Span, err error) {
	var exit cmdExit
	switch {
	case errors.As(err, &exit):
		sp.SetAttributes(attribute.Int("process.exit.code", int(exit)))
		sp.SetStatus(codes.Error, err.Error())
	case err != nil:
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}
