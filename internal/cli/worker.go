package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// Exit codes of CMD that 'baton worker' gives a meaning.
const (
	cmdExitPermanent = 65 // EX_DATAERR: discard the job at once
)

// Sizes of CMD output handling.
const (
	maxOutputLine  = 64 << 10 // a longer line is cut into several prefixed lines
	stderrTailKeep = 4 << 10  // bytes of CMD's stderr kept for the error message
	stderrTailLen  = 400      // bytes of it in the error message, whole lines if possible
	pipeWaitDelay  = 2 * time.Second
)

func (a *app) workerCommand() *cobra.Command {
	kinds := &listFlag{split: true}
	var name string
	var concurrency int
	var leaseTTL, grace, shutdownTimeout, heartbeat, backoffBase, backoffMax time.Duration
	cmd := a.command(&cobra.Command{
		Use: `worker --kind KIND [--kind KIND2...] [--concurrency 10] [--lease-ttl 30s] [--grace 10s]
[--shutdown-timeout 30s] [--heartbeat-interval TTL/3] [--backoff-base 1s] [--backoff-max 1h]
[--name NAME] -- CMD [ARGS...]`,
		Short: "run CMD once per job of KIND",
		Long: `Run jobs of the given kinds from a baton server: CMD runs once per job, up to --concurrency
jobs at once. Jobs on one resource run one at a time, in submission order, under a lease that
the worker renews (every TTL/3) while CMD runs.

- CMD gets the job's args (a JSON object) on stdin, and the worker's environment plus:
    BATON_JOB_ID, BATON_JOB_KIND, BATON_RESOURCE, BATON_JOB_ATTEMPT (1 for the first),
    BATON_JOB_MAX_ATTEMPTS, and BATON_FENCING_TOKEN: pass it to the resource, which should
    refuse writes with a token lower than one it has seen; for a shared job also
    BATON_FENCING_MODE=shared, to pass along so that the resource judges the token as a
    shared holder's. TRACEPARENT is the W3C trace context of the attempt's span, in the
    trace of the job's submitter: a CMD that traces continues it.
- Traces go to an OTLP/HTTP endpoint when the standard OTEL_* environment names one
  (OTEL_EXPORTER_OTLP_ENDPOINT; docs/observability.md).
- CMD's stdout and stderr go to the worker's stderr, each line prefixed with "[job ID] ".
- Exit code 0: the job succeeded. 65 (EX_DATAERR): a permanent failure, the job is discarded
  at once (no retry). Anything else, or death by a signal: the attempt failed and the job is
  retried after a backoff (--backoff-base doubled per attempt, at most --backoff-max, jittered
  down by up to half) while attempts remain, then discarded ('baton dlq'). The error
  recorded names the exit status and the last lines of CMD's stderr.
- CMD runs in its own process group. If the job's lease is lost, the job is cancelled
  ('baton jobs cancel') or times out, or the shutdown timeout passes, the group gets SIGTERM,
  then SIGKILL after --grace. When heartbeats fail (the server is unreachable), SIGTERM comes
  --grace before the job lease's local deadline, so CMD is dead before the server could give
  the job to another worker; --grace is at most a third of --lease-ttl (a longer default is
  lowered to it). The job is reported only after CMD has exited. When CMD exits, what it left
  running in its group is killed.
  On Linux, CMD is killed if the worker dies, even by SIGKILL.
- SIGINT or SIGTERM: stop claiming jobs, let running CMDs finish for up to --shutdown-timeout,
  then stop them (SIGTERM, SIGKILL after --grace; their jobs are retried), and exit 0. A second
  SIGINT or SIGTERM stops running CMDs at once.
- The kinds must be registered ('baton kinds set'). The worker's own messages are logged to
  stderr (key=value lines).

Examples:
  baton worker --kind deploy --concurrency 4 -- ./deploy.sh
  baton worker --kind thumbnail -- sh -c 'jq -r .url | xargs ./make-thumbnail'

Exit code 0 also when stopped by SIGINT or SIGTERM; 2 for an unregistered kind.`,
	}, meta{cmdLine: true, names: flagNames{"handlers": "--kind"},
		exits: []int{exitOK, exitError, exitUsage, exitAuth, exitNoExec, exitNotExist}})
	a.addGlobalFlags(cmd, false)
	fs := cmd.Flags()
	fs.SetInterspersed(false) // the first argument starts CMD: its flags are its own
	fs.Var(kinds, "kind", "run jobs of `KIND` (required; repeat, or separate with commas, for several)")
	fs.IntVar(&concurrency, "concurrency", baton.DefaultConcurrency, "how many jobs (CMDs) run at once, 1-1000")
	fs.DurationVar(&leaseTTL, "lease-ttl", baton.DefaultJobLeaseTTL, "TTL of a job's lease, 1s to 24h; renewed every TTL/3 while CMD runs")
	fs.DurationVar(&grace, "grace", 10*time.Second, "when CMD must stop, how long it has between SIGTERM and SIGKILL; at most a third of --lease-ttl")
	fs.DurationVar(&shutdownTimeout, "shutdown-timeout", baton.DefaultShutdownTimeout, "after SIGINT or SIGTERM, how long running CMDs may go on before they are stopped")
	fs.StringVar(&name, "name", "", "worker `name` recorded on the jobs it runs (default: host:pid:random)")
	fs.DurationVar(&heartbeat, "heartbeat-interval", 0, "how often a running job's lease is renewed; positive, at most a third of --lease-ttl (default: a third of it)")
	fs.DurationVar(&backoffBase, "backoff-base", baton.DefaultBackoffBase, "wait before the first retry of a failed job; doubled per attempt, jittered down by up to half")
	fs.DurationVar(&backoffMax, "backoff-max", baton.DefaultBackoffMax, "longest wait before a retry")
	cmd.RunE = func(cmd *cobra.Command, cmdArgs []string) error {
		stop, err := startTracing("worker", a.stderr)
		if err != nil {
			return usagef("%v", err)
		}
		defer stop()
		return a.work(cmdArgs, workerFlags{kinds: kinds.vals, name: name, concurrency: concurrency, leaseTTL: leaseTTL,
			grace: grace, shutdownTimeout: shutdownTimeout, heartbeat: heartbeat, backoffBase: backoffBase,
			backoffMax: backoffMax, changed: cmd.Flags().Changed})
	}
	return cmd
}

// workerFlags are the settings of baton worker; changed reports a flag given on the command line.
type workerFlags struct {
	kinds                                                                []string
	name                                                                 string
	concurrency                                                          int
	leaseTTL, grace, shutdownTimeout, heartbeat, backoffBase, backoffMax time.Duration
	changed                                                              func(string) bool
}

// work is baton worker: CMD (cmdArgs) for each job of the kinds, until SIGINT or SIGTERM.
func (a *app) work(cmdArgs []string, f workerFlags) error {
	// The worker's log, every job's CMD output and the messages of this command share stderr.
	stderr := &lockedWriter{w: a.stderr}
	kinds := f.kinds
	switch {
	case len(cmdArgs) == 0:
		return usagef("missing CMD (baton worker --kind KIND -- CMD [ARGS...])")
	case len(kinds) == 0:
		return usagef("--kind is required")
	case f.concurrency < 1 || f.concurrency > baton.MaxConcurrency:
		return usagef("--concurrency must be between 1 and %d", baton.MaxConcurrency)
	case f.leaseTTL < store.MinTTL || f.leaseTTL > store.MaxTTL:
		return usagef("--lease-ttl must be between %s and %s (got %s)", store.MinTTL, store.MaxTTL, f.leaseTTL)
	case f.grace < 0:
		return usagef("--grace must not be negative")
	case f.shutdownTimeout < 0:
		return usagef("--shutdown-timeout must not be negative")
	}
	backoff, err := workerTuning(f.changed, f.leaseTTL, f.heartbeat, f.backoffBase, f.backoffMax)
	if err != nil {
		return err
	}
	// When heartbeats fail, CMD gets SIGTERM --grace before the job lease's local deadline and
	// is dead by it: the grace must leave heartbeats (every TTL/3) time to succeed first.
	grace, shutdownTimeout := f.grace, f.shutdownTimeout
	if maxGrace := f.leaseTTL / 3; f.leaseTTL >= store.MinTTL && grace > maxGrace {
		if f.changed("grace") {
			return usagef("--grace %s is longer than a third of --lease-ttl (%s): CMD must be dead before the job could pass to another worker; raise --lease-ttl or lower --grace", grace, maxGrace)
		}
		grace = maxGrace
	}
	for _, k := range kinds {
		if err := store.ValidateKind(k); err != nil {
			return err
		}
	}
	if shutdownTimeout == 0 {
		shutdownTimeout = time.Nanosecond // stop running CMDs at once (0 is the library's default)
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	x := &jobExec{argv: cmdArgs, grace: grace, out: stderr, log: logger, hard: make(chan struct{})}
	handlers := make(map[string]baton.Handler, len(kinds))
	for _, k := range kinds {
		handlers[k] = x.run
	}
	st, err := workerStore(a.g)
	if err != nil {
		return usagef("%v", err)
	}
	defer st.Close()
	q, err := baton.NewQueue(context.Background(), st, &baton.QueueConfig{Logger: logger})
	if err != nil {
		return err
	}
	w, err := q.NewWorker(baton.WorkerConfig{Name: f.name, Concurrency: f.concurrency, Handlers: handlers, StopGrace: grace,
		LeaseTTL: f.leaseTTL, HeartbeatInterval: f.heartbeat, Backoff: backoff, ShutdownTimeout: shutdownTimeout,
		Logger: logger, OnJobEnd: x.ended})
	if err != nil {
		return err
	}

	// Resolve CMD before claiming anything, so that a typo does not fail every job.
	if _, err := exec.LookPath(cmdArgs[0]); err != nil {
		return &cmdNotRunnable{err}
	}
	if err := checkKinds(q, kinds); err != nil {
		return err
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	logger.Info("baton worker: started", "name", w.Name(), "kinds", strings.Join(kinds, ","), "concurrency", f.concurrency,
		"server", a.g.server)
	signals := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			logger.Info("baton worker: stopped")
			return nil
		case sig := <-sigs:
			signals++
			switch signals {
			case 1:
				cancel()
				logger.Info("baton worker: shutting down: claiming no more jobs; waiting for running jobs",
					"signal", sig.String(), "running", w.Running(), "timeout", shutdownTimeout)
			case 2:
				logger.Warn("baton worker: second signal: stopping running CMDs now", "signal", sig.String(),
					"running", w.Running())
				close(x.hard)
			}
		}
	}
}

// workerClaimWait bounds how long the server holds one of the worker's claim requests when no
// job is claimable. New jobs end the wait at once, so it sets the idle request rate, and how long
// a shutdown waits for the claim in flight only when the worker's stop of that wait (POST
// /v1/jobs/claim/stop) does not reach the server holding it (a claim is never abandoned: the
// jobs it takes would wait for the reaper).
const workerClaimWait = 2 * time.Second

// workerStore is the worker's client store: the other commands' (g.store checks --server and
// --token and names them in its errors), with a short claim wait.
func workerStore(g *globals) (*client.Store, error) {
	st, err := g.store()
	if err != nil {
		return nil, err
	}
	st.Close()
	return client.NewStore(client.Config{BaseURL: g.server, Token: g.token, ClaimWait: workerClaimWait})
}

// checkKinds makes sure that the worker's kinds are registered, so that a typo is not a worker
// that waits forever. A token that may not list kinds skips the check.
func checkKinds(q *baton.Queue, kinds []string) error {
	ctx, cancel := callContext(0)
	defer cancel()
	registered, err := q.Kinds(ctx)
	if errors.Is(err, client.ErrForbidden) {
		return nil
	}
	if err != nil {
		return err
	}
	var missing, names []string
	for _, k := range registered {
		names = append(names, k.Name)
	}
	for _, k := range kinds {
		if !slices.Contains(names, k) {
			missing = append(missing, strconv.Quote(k))
		}
	}
	if len(missing) > 0 {
		known := "none"
		if len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return usagef("kind %s not registered on the server (registered: %s); register with 'baton kinds set NAME'",
			strings.Join(missing, ", "), known)
	}
	return nil
}

// jobExec runs CMD for each job: the handler of every kind of the worker.
type jobExec struct {
	argv  []string
	grace time.Duration
	out   io.Writer // the worker's stderr, serialised
	log   *slog.Logger
	hard  chan struct{} // closed at the second signal: stop running CMDs now
}

// run is the handler: one attempt of job is one run of CMD.
func (x *jobExec) run(ctx context.Context, job *baton.Job) error {
	cmd := exec.Command(x.argv[0], x.argv[1:]...)
	args := []byte(job.Args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	cmd.Stdin = bytes.NewReader(args)
	cmd.Env = append(os.Environ(),
		"BATON_JOB_ID="+strconv.FormatInt(job.ID, 10),
		"BATON_JOB_KIND="+job.Kind,
		"BATON_RESOURCE="+job.Resource,
		"BATON_FENCING_TOKEN="+strconv.FormatUint(job.Token, 10),
		"BATON_JOB_ATTEMPT="+strconv.Itoa(job.Attempt),
		"BATON_JOB_MAX_ATTEMPTS="+strconv.Itoa(job.MaxAttempts))
	cmd.Env = append(cmd.Env, holdsEnv(job.Resources, job.Limits, job.Slots)...)
	if job.Shared {
		cmd.Env = append(cmd.Env, fencingModeShared)
	}
	if tp := baton.TraceParent(ctx); tp != "" {
		// The attempt's span (in the submitter's trace): a CMD that traces continues it.
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tp)
	}
	prefix := fmt.Sprintf("[job %d] ", job.ID)
	tail := &tailBuffer{}
	outW := &prefixWriter{w: x.out, prefix: prefix}
	errW := &prefixWriter{w: x.out, prefix: prefix, tail: tail}
	cmd.Stdout, cmd.Stderr = outW, errW
	// Output is copied through pipes: if something outside CMD's process group keeps them open
	// after CMD exits, give up on it after a while rather than hold the job.
	cmd.WaitDelay = pipeWaitDelay

	x.log.Info("baton worker: job started", "job", job.ID, "kind", job.Kind, "resource", job.Resource,
		"attempt", fmt.Sprintf("%d/%d", job.Attempt, job.MaxAttempts), "token", job.Token)
	p, err := startJobProcess(cmd)
	if err != nil {
		return fmt.Errorf("cannot start CMD: %w", err)
	}
	var stopped error // why CMD was told to stop; nil if it was not
	var kill <-chan time.Time
	ctxDone, hard := ctx.Done(), (<-chan struct{})(x.hard)
	for running := true; running; {
		select {
		case <-p.done:
			running = false
		case <-ctxDone:
			stopped = context.Cause(ctx)
		case <-hard:
			stopped = errors.New("baton worker got a second signal")
		case <-kill:
			kill = nil
			x.log.Warn("baton worker: CMD still running after SIGTERM: sending SIGKILL", "job", job.ID, "grace", x.grace)
			p.signal(syscall.SIGKILL)
		}
		if stopped != nil && ctxDone != nil {
			ctxDone, hard = nil, nil
			x.log.Warn("baton worker: stopping CMD: SIGTERM now, SIGKILL after the grace period", "job", job.ID,
				"reason", stopped.Error(), "grace", x.grace)
			p.signal(syscall.SIGTERM)
			t := time.NewTimer(x.grace)
			defer t.Stop()
			kill = t.C
		}
	}
	outW.flush()
	errW.flush()
	ps := cmd.ProcessState
	if ps == nil {
		return fmt.Errorf("CMD: %w", p.waitErr)
	}
	if errors.Is(p.waitErr, exec.ErrWaitDelay) {
		x.log.Warn("baton worker: CMD exited but something it started kept its output open; stopped reading it", "job", job.ID)
	}
	status, msg := exitDescription(ps)
	if stopped != nil {
		// Whatever CMD's status: it was interrupted, the work may be half done.
		msg = fmt.Sprintf("stopped (%v): CMD %s", stopped, msg)
	}
	if t := tail.last(stderrTailLen); t != "" {
		msg += "; stderr: " + t
	}
	switch {
	case stopped != nil:
		return errors.New(msg)
	case status == 0:
		return nil
	case status == cmdExitPermanent:
		return baton.Permanent(errors.New(msg))
	default:
		return errors.New(msg)
	}
}

// ended logs the end of an attempt (the Worker's OnJobEnd).
func (x *jobExec) ended(job *baton.Job, outcome baton.JobState, took time.Duration) {
	attempt := fmt.Sprintf("%d/%d", job.Attempt, job.MaxAttempts)
	took = took.Round(time.Millisecond)
	switch outcome {
	case "":
		x.log.Warn("baton worker: job attempt not reported (lease lost, or the server refused); the server's reaper will end it",
			"job", job.ID, "attempt", attempt, "took", took)
	case baton.JobSucceeded:
		x.log.Info("baton worker: job ended", "job", job.ID, "state", string(outcome), "attempt", attempt, "took", took)
	default:
		msg := ""
		if n := len(job.Errors); n > 0 {
			msg = job.Errors[n-1].Message
		}
		x.log.Warn("baton worker: job ended", "job", job.ID, "state", string(outcome), "attempt", attempt, "took", took,
			"error", msg)
	}
}

// exitDescription is CMD's exit code (128+N for death by signal N) and its description.
func exitDescription(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	code := ps.ExitCode()
	if code == cmdExitPermanent {
		return code, fmt.Sprintf("exit status %d (EX_DATAERR: permanent failure, not retried)", code)
	}
	return code, fmt.Sprintf("exit status %d", code)
}

// jobProcess is a running CMD, signalled as a process group where the system allows.
type jobProcess struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	exited  bool          // under mu: no more signals (the group ID may be reused once CMD is reaped)
	done    chan struct{} // closed when CMD is reaped and its output copied
	waitErr error         // cmd.Wait's, set before done is closed
}

func startJobProcess(cmd *exec.Cmd) (*jobProcess, error) {
	setJobSysProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &jobProcess{cmd: cmd, done: make(chan struct{})}
	go p.wait()
	return p, nil
}

func (p *jobProcess) wait() {
	defer close(p.done)
	if awaitExitNoReap(p.cmd.Process.Pid) {
		// CMD exited but is not reaped: its process group ID cannot be reused yet, so killing
		// what is left of the group cannot hit anybody else's processes.
		p.mu.Lock()
		p.exited = true
		signalJobGroup(p.cmd, syscall.SIGKILL)
		p.mu.Unlock()
		p.waitErr = p.cmd.Wait()
		return
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	p.waitErr = err
}

// signal sends sig to CMD (its process group where supported) unless it has exited.
func (p *jobProcess) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		signalJobGroup(p.cmd, sig)
	}
}

// prefixWriter writes each line of a CMD's output to w with a prefix, one Write per line, so
// that lines of concurrent jobs do not mix. tail, if set, keeps the end of the raw output.
type prefixWriter struct {
	w      io.Writer
	prefix string
	tail   *tailBuffer
	mu     sync.Mutex
	buf    []byte // an incomplete line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tail != nil {
		p.tail.write(b)
	}
	p.buf = append(p.buf, b...)
	rest := p.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(rest) >= maxOutputLine {
				p.emit(rest)
				rest = nil
			}
			break
		}
		p.emit(rest[:i])
		rest = rest[i+1:]
	}
	p.buf = append(p.buf[:0], rest...)
	return len(b), nil
}

// flush writes an incomplete last line.
func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.emit(p.buf)
		p.buf = p.buf[:0]
	}
}

func (p *prefixWriter) emit(line []byte) {
	out := make([]byte, 0, len(p.prefix)+len(line)+1)
	out = append(append(append(out, p.prefix...), bytes.TrimSuffix(line, []byte("\r"))...), '\n')
	_, _ = p.w.Write(out) // the worker's stderr failing must not fail the job
}

// tailBuffer keeps the last stderrTailKeep bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2*stderrTailKeep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTailKeep:]...)
	}
}

// last returns the last lines of the output, at most about n bytes: whole lines if the last
// line fits, valid UTF-8, trailing blank lines dropped.
func (t *tailBuffer) last(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimRight(t.buf, " \t\r\n")
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		} else {
			for len(b) > 0 && !utf8.RuneStart(b[0]) {
				b = b[1:]
			}
			b = append([]byte("…"), b...)
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}
