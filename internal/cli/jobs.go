package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// exitConflict: the job's state forbids the operation (cancel of a finished job, retry of a
// running one), or a resource's version did not match --if-version.
const exitConflict = 4

const jobExitCodesHelp = `Exit codes: 0 success; 1 error (server unreachable, unexpected); 2 usage error or invalid
input (nothing written); 3 no such job or resource; 4 the job's state forbids it, or the
resource's version did not match; 75 resource busy (submit under the reject policy);
77 unauthorized or forbidden.`

const jobsUsage = `Usage: baton jobs COMMAND [flags]

Submit and manage jobs on a baton server. Jobs on one resource run one at a time, in
submission order; run them with 'baton worker'. See also 'baton dlq', 'baton resources' and
'baton kinds'.

Commands:
  submit  enqueue a job, or a batch of jobs from a JSON Lines file
  list    list jobs, by ID
  show    show a job, with its error history
  cancel  cancel a job (a running one stops at its worker's next heartbeat)
  retry   run a discarded, cancelled or skipped job again, or a retryable one now
  stats   count unfinished jobs per kind and state

Run 'baton jobs COMMAND --help' for a command's flags.

` + jobExitCodesHelp + "\n"

func jobsCommand(args []string, g *globals, stdin io.Reader, stdout, stderr io.Writer) int {
	submit := func(args []string, g *globals, stdout, stderr io.Writer) int {
		return jobsSubmit(args, g, stdin, stdout, stderr)
	}
	list := func(args []string, g *globals, stdout, stderr io.Writer) int {
		return jobsList(args, g, stdout, stderr, false)
	}
	return runGroup("baton jobs", jobsUsage, map[string]subcommand{
		"submit": submit,
		"list":   list, "ls": list,
		"show": jobsShow, "get": jobsShow,
		"cancel": jobsCancel,
		"retry":  jobsRetry,
		"stats":  jobsStats,
	}, args, g, stdout, stderr)
}

// jobStore returns the server's job store, or an error that names the flag at fault.
func (g *globals) jobStore() (store.JobStore, func(), error) {
	st, err := g.store()
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}

// openJobStore is jobStore for a command: a failure is a usage error (a bad --server or --token).
func openJobStore(c *command, g *globals) (store.JobStore, func(), int, bool) {
	js, closeFn, err := g.jobStore()
	if err != nil {
		return nil, nil, c.usageError("%v", err), false
	}
	return js, closeFn, 0, true
}

// flagNames maps the store's field names to a command's flags or arguments, so that an invalid
// input is reported as the user wrote it. Fields not listed are shown as --field-name.
type flagNames map[string]string

func (n flagNames) name(field string) string {
	if s, ok := n[field]; ok {
		return s
	}
	if field == "" || field == "id" || field == "token" {
		return field
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

// jobFail prints err for humans and returns its exit code. what names the object a not-found
// error is about ("job 12", `resource "db/main"`).
func (c *command) jobFail(g *globals, err error, names flagNames, what string) int {
	var inv *store.InvalidArgumentError
	var busy *store.ResourceBusyError
	var state *store.JobStateError
	var version *store.VersionMismatchError
	var msg string
	code := exitCode(err)
	switch {
	case errors.As(err, &inv):
		msg = fmt.Sprintf("invalid %s: %s%s", names.name(inv.Field), inv.Rule, c.nothingWritten())
		code = exitUsage
	case errors.As(err, &busy):
		msg = fmt.Sprintf("resource %q is busy: job %d is %s (the reject policy refuses to queue behind it; nothing written)",
			busy.Resource, busy.HeadJob, busy.State)
		code = exitBusy
	case errors.As(err, &state):
		msg = fmt.Sprintf("cannot %s job %d: it is %s", state.Op, state.ID, state.State)
		code = exitConflict
	case errors.As(err, &version):
		msg = fmt.Sprintf("resource %q is at version %d, not %d (--if-version): it changed meanwhile",
			version.Key, version.Current, version.Want)
		code = exitConflict
	case errors.Is(err, store.ErrNotFound) && what != "":
		msg = what + " not found"
		code = exitNotFound
	default:
		msg = describe(g, err)
	}
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, msg)
	return code
}

// nothingWritten is the end of a refusal of bad input: " (nothing written)" for a command
// that writes, nothing for a read.
func (c *command) nothingWritten() string {
	if c.writes {
		return " (nothing written)"
	}
	return ""
}

// parseJobID reads a job ID argument.
func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("job ID must be a positive integer (got %q)", s)
	}
	return id, nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

var submitNames = flagNames{"delay": "--in", "scheduled_at": "--at"}

func jobsSubmit(args []string, g *globals, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommand("baton jobs submit", `Usage: baton jobs submit --kind KIND --resource KEY [--args JSON] [--idempotency-key K]
         [--policy queue|skip|reject] [--max-attempts N] [--priority N] [--at TIME | --in DURATION]
         [-o table|json]
       baton jobs submit --file FILE|- [-o table|json]

Enqueue a job of a registered kind (see 'baton kinds') on a resource, and print it. Jobs on one
resource run one at a time, in submission order.

- With --idempotency-key, a key that names an existing job returns that job ("already
  submitted", exit code 0) and submits nothing, whatever the other flags say.
- --policy (default: the kind's) says what to do if the resource has unfinished jobs: queue
  behind them; skip (the job is recorded as skipped); reject (exit code 75, nothing written).
- If the resource is cooling down after a job of a kind with a resource cooldown (see 'baton
  kinds set --resource-cooldown'), the job is recorded as skipped whatever the policy, and the
  output says for how long the resource still cools down (exit code 0).
- Invalid input (a malformed --args, an unregistered kind, ...) exits with code 2 and writes
  nothing.

- --file submits a batch, all or nothing: one JSON object per line (blank lines are skipped)
  with the members of POST /v1/jobs: kind, resource, args, policy, max_attempts, priority,
  scheduled_at, delay_ms, idempotency_key; at most 10000 jobs; - reads stdin. Each job is
  submitted as if one after the other, in file order. A bad line, or a job refused under the
  reject policy, fails the whole batch (exit code 2 or 75, naming the line; nothing written).

Examples:
  baton jobs submit --kind deploy --resource svc/api --args '{"version":"v2"}' --idempotency-key deploy:api:v2
  baton jobs submit --kind report --resource reports/daily --in 10m
  baton jobs submit --kind migrate --resource db/main --policy reject

Output (table):
  ID  KIND    RESOURCE  STATE      ATTEMPT  CREATED               INFO
  12  deploy  svc/api   available  0/5      2026-11-21T14:31:34Z  next

With -o json: {"job": JOB, "existing": false}, JOB as in 'baton jobs show -o json'; with --file,
{"results": [{"existing": false, "job": JOB}, ...]} in file order.

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	c.writes = true
	kind := c.fs.String("kind", "", "the job's `KIND` (required; registered with 'baton kinds set')")
	resource := c.fs.String("resource", "", "the resource `KEY` the job works on (required)")
	argsJSON := c.fs.String("args", "", "the job's arguments, a `JSON` object (default {}), at most 32 KiB")
	idem := c.fs.String("idempotency-key", "", "submit at most once per `K`: an existing job with this key is returned instead")
	policy := c.fs.String("policy", "", "if the resource is busy: queue, skip or reject (default: the kind's)")
	maxAttempts := c.fs.Int("max-attempts", 0, "attempts before the job is discarded, 1-1000 (default: the kind's)")
	priority := c.fs.Int("priority", 0, "0-9; smaller is claimed first, across resources")
	at := c.fs.String("at", "", "do not start before `TIME` (RFC 3339, e.g. 2026-11-21T14:30:00Z)")
	in := c.fs.Duration("in", 0, "do not start before `DURATION` from now (on the server's clock)")
	file := c.fs.String("file", "", "submit the jobs of a JSON Lines `FILE` (- for stdin) as one batch, all or nothing")
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	if *file != "" {
		for _, f := range []string{"kind", "resource", "args", "idempotency-key", "policy", "max-attempts", "priority", "at", "in"} {
			if flagSet(c.fs, f) {
				return c.usageError("--file and --%s exclude each other: give each job's %s in the file", f, f)
			}
		}
		return jobsSubmitFile(c, g, *file, stdin, stdout)
	}
	switch {
	case *kind == "":
		return c.usageError("--kind is required")
	case *resource == "":
		return c.usageError("--resource is required")
	case *at != "" && flagSet(c.fs, "in"):
		return c.usageError("--at and --in exclude each other")
	}
	p := &store.SubmitParams{Kind: *kind, Resource: *resource, IdempotencyKey: *idem,
		Policy: store.BusyPolicy(*policy), MaxAttempts: *maxAttempts, Priority: *priority, Delay: *in}
	if *argsJSON != "" {
		p.Args = json.RawMessage(*argsJSON)
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return c.usageError("--at must be an RFC 3339 time, e.g. 2026-11-21T14:30:00Z (got %q)", *at)
		}
		p.ScheduledAt = t
	}
	if err := p.Validate(); err != nil {
		return c.jobFail(g, err, submitNames, "")
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	res, err := js.SubmitJob(ctx, p)
	if err != nil {
		return c.jobFail(g, err, submitNames, "")
	}
	if g.output == "json" {
		err = writeJSON(stdout, submitJSON{Job: wire.JobFrom(res.Job), Existing: res.Existing})
	} else {
		if res.Existing {
			fmt.Fprintf(stdout, "already submitted: job %d has idempotency key %q; nothing new was submitted\n",
				res.Job.ID, res.Job.IdempotencyKey)
		}
		if until, left, ok := res.Job.CooldownSkip(); ok && !res.Existing {
			fmt.Fprintf(stdout, "skipped: resource %s was recently remediated; it cools down for another %s (until %s)\n",
				printable(res.Job.Resource), roundDuration(left), until.UTC().Format("15:04:05Z"))
		}
		err = writeJobTable(stdout, []*store.Job{res.Job})
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}

// jobsList is 'baton jobs list', and 'baton dlq list' (dlq: only discarded jobs).
func jobsList(args []string, g *globals, stdout, stderr io.Writer, dlq bool) int {
	name, usage := "baton jobs list", `Usage: baton jobs list [--state S] [--kind K] [--resource R] [--limit N] [--after ID] [-o table|json]

List jobs in ID order (oldest first), one page: at most --limit (default 100, at most 1000). If
the page is full, stderr says how to get the next one (--after the last ID). --state and --kind
take several values (repeated, or separated by commas), --resource several (repeated): a job
is listed if it matches any value of each.

States: scheduled, available, running, retryable (unfinished); succeeded, cancelled,
discarded (the dead letters, see 'baton dlq'), skipped.

Example:
  baton jobs list --resource svc/api --state retryable

Output (table):
  ID  KIND    RESOURCE  STATE      ATTEMPT  CREATED               INFO
  12  deploy  svc/api   running    1/5      2026-11-21T14:31:34Z  worker host-1:812:9f0c2d (token 43)
  13  deploy  svc/api   available  0/5      2026-11-21T14:31:40Z  queued behind the resource's head

With -o json, a JSON array of jobs as in 'baton jobs show -o json'.

`+jobExitCodesHelp+"\n"
	if dlq {
		name, usage = "baton dlq list", `Usage: baton dlq list [--kind K] [--resource R] [--limit N] [--after ID] [-o table|json]

List the dead letters: jobs discarded after their last attempt failed, a permanent failure
(CMD exit code 65 under 'baton worker'), or a refused state guard. One page, in ID order: at
most --limit (default 100, at most 1000); if the page is full, stderr says how to get the next.
Retry them with 'baton dlq retry', delete them with 'baton dlq purge'.

Output (table):
  ID  KIND    RESOURCE  STATE      ATTEMPT  CREATED               INFO
  17  deploy  svc/api   discarded  3/3      2026-11-21T14:31:34Z  handler_error: exit status 1; stderr: …

`+jobExitCodesHelp+"\n"
	}
	c := newCommand(name, usage, stdout, stderr)
	g.register(c.fs, true)
	states, kinds, resources := &listFlag{split: true}, &listFlag{split: true}, &listFlag{}
	if !dlq {
		c.fs.Var(states, "state", "only jobs in state `S` (repeat, or separate with commas, for several)")
	}
	c.fs.Var(kinds, "kind", "only jobs of kind `K` (repeat, or separate with commas, for several)")
	c.fs.Var(resources, "resource", "only jobs on resource `R` (repeat for several)")
	limit := c.fs.Int("limit", 0, "at most `N` jobs (1-1000; default 100)")
	after := c.fs.Int64("after", 0, "only jobs with an ID greater than `ID` (the next page)")
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	if *limit < 0 || *limit > store.MaxListLimit {
		return c.usageError("--limit must be between 1 and %d", store.MaxListLimit)
	}
	filters := jobFilters{states: states.vals, kinds: kinds.vals, resources: resources.vals}
	if dlq {
		filters.states = []string{string(store.JobDiscarded)}
	}
	if n := max(len(filters.states), 1) * max(len(filters.kinds), 1) * max(len(filters.resources), 1); n > maxFilterCombos {
		return c.usageError("--state × --kind × --resource make %d combinations; at most %d", n, maxFilterCombos)
	}
	ps, err := filters.params(*after, *limit)
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	p := ps[0]
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	jobs, err := listJobsAny(ctx, js, ps)
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.JobsFrom(jobs))
	} else if len(jobs) == 0 {
		if dlq {
			_, err = fmt.Fprintln(stdout, "no dead letters")
		} else {
			_, err = fmt.Fprintln(stdout, "no jobs")
		}
	} else {
		err = writeJobTable(stdout, jobs)
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	if len(jobs) == p.Limit && g.output != "json" {
		fmt.Fprintf(stderr, "%s: more jobs may follow: add --after %d for the next page\n", c.name, jobs[len(jobs)-1].ID)
	}
	return exitOK
}

func jobsShow(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton jobs show", `Usage: baton jobs show ID [-o table|json]

Show a job: its state, attempts, schedule, lease (worker, fencing token, expiry) and the error
of every failed attempt. Exit code 3 if there is no such job (finished jobs are deleted after
the server's retention, 24 h by default).

Example:
  baton jobs show 12

Output:
  ID:               12
  Kind:             deploy
  Resource:         svc/api
  State:            retryable (head of its resource)
  Attempt:          1 of 5
  ...
  Errors:
    ATTEMPT  AT                    CODE           MESSAGE
    1        2026-11-21T14:31:40Z  handler_error  exit status 1; stderr: connection refused

With -o json, the job object of the HTTP API: {"id", "seq", "kind", "resource", "args", "state", "attempt",
"max_attempts", "priority", "idempotency_key", "errors": [{"attempt", "at", "code", "message"}],
"created_at", "scheduled_at", "attempted_at", "finished_at", "head", "worker", "token",
"lease_expires_at", "cancel_requested", "timeout_ms"} (empty fields left out).

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	pos, code, ok := clientCommand(c, g, args, 1, "job ID")
	if !ok {
		return code
	}
	id, err := parseJobID(pos[0])
	if err != nil {
		return c.usageError("%v", err)
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	job, err := js.GetJob(ctx, id)
	if err != nil {
		return c.jobFail(g, err, nil, fmt.Sprintf("job %d", id))
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.JobFrom(job))
	} else {
		err = writeJobDetail(stdout, job)
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}

func jobsCancel(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton jobs cancel", `Usage: baton jobs cancel ID [-o table|json]

Cancel a job and print it. A job that is not running is cancelled at once. For a running job
a cancel is requested: its worker sees the request at its next heartbeat and stops the work
('baton worker' sends CMD SIGTERM), and the job ends cancelled; the resource stays locked until
then. Exit code 4 if the job has finished already, 3 if there is no such job.

Example:
  baton jobs cancel 12

`+jobExitCodesHelp+"\n", stdout, stderr)
	return jobAction(c, args, g, stdout, "cancel", func(js store.JobStore, id int64) (*store.Job, error) {
		ctx, cancel := callContext(0)
		defer cancel()
		return js.CancelJob(ctx, id)
	})
}

func jobsRetry(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton jobs retry", `Usage: baton jobs retry ID [-o table|json]

Run a job again and print it: a discarded, cancelled or skipped job becomes available at the
back of its resource's queue (with one more attempt if it had used them all); a retryable job
becomes claimable now instead of after its backoff. Exit code 4 for a job in another state,
3 if there is no such job.

Example:
  baton jobs retry 17

`+jobExitCodesHelp+"\n", stdout, stderr)
	return jobAction(c, args, g, stdout, "retry", func(js store.JobStore, id int64) (*store.Job, error) {
		ctx, cancel := callContext(0)
		defer cancel()
		return js.RetryJob(ctx, id)
	})
}

// jobAction runs a command on one job ID and prints the job it returns.
func jobAction(c *command, args []string, g *globals, stdout io.Writer, op string, do func(store.JobStore, int64) (*store.Job, error)) int {
	g.register(c.fs, true)
	c.writes = true
	pos, code, ok := clientCommand(c, g, args, 1, "job ID")
	if !ok {
		return code
	}
	id, err := parseJobID(pos[0])
	if err != nil {
		return c.usageError("%v", err)
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	job, err := do(js, id)
	if err != nil {
		return c.jobFail(g, err, nil, fmt.Sprintf("job %d", id))
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.JobFrom(job))
	} else {
		err = writeJobTable(stdout, []*store.Job{job})
		if err == nil && op == "cancel" && job.State == store.JobRunning {
			_, err = fmt.Fprintf(stdout, "job %d is running: cancel requested; it ends when its worker stops it\n", job.ID)
		}
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}

// submitJSON is the -o json output of submit: the API's job object, and whether the
// idempotency key named an existing job.
type submitJSON struct {
	Job      wire.Job `json:"job"`
	Existing bool     `json:"existing"`
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine makes a message fit a table cell: one line, at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// jobInfo is the INFO column: what the job waits for, who runs it, or why it ended.
func jobInfo(j *store.Job) string {
	lastErr := ""
	if n := len(j.Errors); n > 0 {
		e := j.Errors[n-1]
		lastErr = oneLine(e.Code+": "+e.Message, 72)
	}
	switch j.State {
	case store.JobScheduled:
		return "starts at " + formatTime(j.ScheduledAt)
	case store.JobAvailable:
		if j.Head {
			return "next"
		}
		return "queued behind the resource's head"
	case store.JobRunning:
		s := fmt.Sprintf("worker %s (token %d)", printable(j.Worker), j.Token)
		if j.CancelRequested {
			s += ", cancel requested"
		}
		return s
	case store.JobRetryable:
		s := "retry at " + formatTime(j.ScheduledAt)
		if lastErr != "" {
			s += " after " + lastErr
		}
		return s
	case store.JobCancelled:
		return cancelInfo(j)
	default: // succeeded, discarded, skipped
		if lastErr != "" && j.State != store.JobSucceeded {
			return lastErr
		}
		return "finished " + formatTime(j.FinishedAt)
	}
}

// writeJobTable prints jobs as aligned columns.
func writeJobTable(w io.Writer, jobs []*store.Job) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tKIND\tRESOURCE\tSTATE\tATTEMPT\tCREATED\tINFO")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Kind, printable(j.Resource), j.State,
			j.Attempt, j.MaxAttempts, formatTime(j.CreatedAt), jobInfo(j))
	}
	return tw.Flush()
}

// writeJobDetail prints one job as "Field: value" lines and its error history.
func writeJobDetail(w io.Writer, j *store.Job) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", strconv.FormatInt(j.ID, 10))
	row("Kind", j.Kind)
	row("Resource", printable(j.Resource))
	state := string(j.State)
	if j.Head && !j.State.Final() {
		state += " (head of its resource)"
	}
	if j.CancelRequested {
		state += ", cancel requested"
	}
	row("State", state)
	if j.State == store.JobCancelled {
		row("Cancelled", cancelInfo(j))
	}
	row("Attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
	row("Priority", strconv.Itoa(j.Priority))
	if j.IdempotencyKey != "" {
		row("Idempotency key", printable(j.IdempotencyKey))
	}
	args := string(j.Args)
	if args == "" {
		args = "{}"
	}
	row("Args", oneLine(args, 200))
	row("Created", formatTime(j.CreatedAt))
	row("Scheduled", formatTime(j.ScheduledAt))
	row("Attempted", formatTime(j.AttemptedAt))
	row("Finished", formatTime(j.FinishedAt))
	if j.Worker != "" {
		lease := fmt.Sprintf("%s, token %d", printable(j.Worker), j.Token)
		if j.State == store.JobRunning && !j.LeaseExpiresAt.IsZero() {
			lease += ", lease until " + formatTime(j.LeaseExpiresAt)
		}
		row("Worker", lease)
	}
	if j.Timeout > 0 {
		row("Timeout", j.Timeout.String())
	}
	if len(j.Errors) == 0 {
		row("Errors", "none")
		return tw.Flush()
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Errors (of attempts):")
	tw = newTable(w)
	fmt.Fprintln(tw, "  ATTEMPT\tAT\tCODE\tMESSAGE")
	for _, e := range j.Errors {
		// A message may span lines (a CMD's stderr): continuation lines are indented.
		lines := strings.Split(strings.TrimRight(e.Message, "\n"), "\n")
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", e.Attempt, formatTime(e.At), e.Code, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "  \t\t\t%s\n", l)
		}
	}
	return tw.Flush()
}
