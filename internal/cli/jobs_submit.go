package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// submitJSON is the -o json output of submit: the API's job object, and whether the
// idempotency key named an existing job.
type submitJSON struct {
	Job      wire.Job `json:"job"`
	Existing bool     `json:"existing"`
}

// busyPolicies are the values of --policy (jobs submit, kinds set).
var busyPolicies = []string{string(store.PolicyQueue), string(store.PolicySkip), string(store.PolicyReject),
	string(store.PolicyReplace)}

func (a *app) jobsSubmitCommand() *cobra.Command {
	var kind, argsJSON, idem, policy, at, file, mode string
	var shared bool
	resources, limits := &listFlag{exact: true}, &listFlag{}
	var maxAttempts, priority int
	var in, debounce time.Duration
	cmd := a.command(&cobra.Command{
		Use: `submit --kind KIND --resource KEY [--resource KEY2...] [--args JSON] [--idempotency-key K]
[--policy queue|skip|reject|replace] [--debounce D] [--max-attempts N] [--priority N] [--at TIME | --in DURATION]
[--mode exclusive|shared | --shared] [--limit NAME...] [-o table|json]
| submit --file FILE|- [-o table|json]`,
		Short: "enqueue a job, or a batch of jobs from a JSON Lines file",
		Long: `Enqueue a job of a registered kind (see 'baton kinds') on a resource, and print it. Jobs on one
resource run one at a time, in submission order.

- With --idempotency-key, a key that names an existing job returns that job ("already
  submitted", exit code 0) and submits nothing, whatever the other flags say.
- --policy (default: the kind's) says what to do if the resource has unfinished jobs: queue
  behind them; skip (the job is recorded as skipped); reject (exit code 75, nothing written);
  replace (latest wins: the queued jobs of the same kind on the resource are superseded by this
  one, a running one is asked to stop, and this one starts once it has ended; jobs of other
  kinds are left alone). A kind of policy skip or reject refuses --policy replace.
- --debounce D (policy replace only, the submit's or the kind's; 10ms to 24h): the job starts
  no earlier than D from now (server clock), so that a burst of replacing submits runs once,
  the last, D after the burst. Default: the kind's debounce.
- If the resource is cooling down after a job of a kind with a resource cooldown (see 'baton
  kinds set --resource-cooldown'), the job is recorded as skipped whatever the policy, and the
  output says for how long the resource still cools down (exit code 0).
- Beyond one key: --resource repeated makes each attempt hold every KEY, all or nothing, under
  one token (the job queues on the first KEY only); --mode shared (or --shared) holds them
  shared with other shared holders (default: the kind's mode); --limit NAME (repeatable) takes
  one unit of the limit NAME ('baton limits set NAME N') per attempt, besides the kind's
  limits. An attempt starts only when all of them are free.
- Invalid input (a malformed --args, an unregistered kind, an unknown limit, ...) exits with
  code 2 and writes nothing.

- --file submits a batch, all or nothing: one JSON object per line (blank lines are skipped)
  with the members of POST /v1/jobs: kind, resource, args, policy, max_attempts, priority,
  scheduled_at, delay_ms, debounce_ms, idempotency_key, mode, shared, resources, limits; at most 10000
  jobs; - reads stdin. Each job is submitted as if one after the other, in file order. A bad
  line, or a job refused under the reject policy, fails the whole batch (exit code 2 or 75,
  naming the line; nothing written).

Examples:
  baton jobs submit --kind deploy --resource svc/api --args '{"version":"v2"}' --idempotency-key deploy:api:v2
  baton jobs submit --kind report --resource reports/daily --in 10m
  baton jobs submit --kind migrate --resource db/main --policy reject
  baton jobs submit --kind reindex --resource search/products --policy replace --debounce 30s
  baton jobs submit --kind drain --resource node/7 --resource rack/3 --limit zone/eu --shared

Output (table):
  ID  KIND    RESOURCE  STATE      ATTEMPT  CREATED               INFO
  12  deploy  svc/api   available  0/5      2026-11-21T14:31:34Z  next

With -o json: {"job": JOB, "existing": false}, JOB as in 'baton jobs show -o json'; with --file,
{"results": [{"existing": false, "job": JOB}, ...]} in file order.`,
		Args: noArgs,
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitBusy, exitAuth}, writes: true,
		names: flagNames{"delay": "--in", "scheduled_at": "--at", "resources": "--resource", "limits": "--limit",
			"debounce": "--debounce"}})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&kind, "kind", "", "the job's `KIND` (required; registered with 'baton kinds set')")
	fs.Var(resources, "resource", "the resource `KEY` the job works on (required); repeat to hold more resources with it, all or nothing")
	fs.StringVar(&argsJSON, "args", "", "the job's arguments, a `JSON` object (default {}), at most 32 KiB")
	fs.StringVar(&idem, "idempotency-key", "", "submit at most once per `K`: an existing job with this key is returned instead")
	fs.StringVar(&policy, "policy", "", "if the resource is busy: queue, skip, reject or replace (default: the kind's)")
	enumFlag(cmd, "policy", busyPolicies...)
	fs.DurationVar(&debounce, "debounce", 0, "policy replace only: start no earlier than `D` from now, 10ms-24h (default: the kind's)")
	fs.IntVar(&maxAttempts, "max-attempts", 0, "attempts before the job is discarded, 1-1000 (default: the kind's)")
	fs.IntVar(&priority, "priority", 0, "0-9; smaller is claimed first, across resources")
	fs.StringVar(&at, "at", "", "do not start before `TIME` (RFC 3339, e.g. 2026-11-21T14:30:00Z)")
	fs.DurationVar(&in, "in", 0, "do not start before `DURATION` from now (on the server's clock)")
	fs.StringVar(&mode, "mode", "", "how attempts hold the resources: exclusive or shared with other shared holders (default: the kind's)")
	enumFlag(cmd, "mode", store.ModeExclusive, store.ModeShared)
	fs.BoolVar(&shared, "shared", false, "same as --mode shared")
	fs.Var(limits, "limit", "also take one unit of the limit `NAME` per attempt, besides the kind's; repeatable")
	fs.StringVar(&file, "file", "", "submit the jobs of a JSON Lines `FILE` (- for stdin) as one batch, all or nothing")
	fileFlag(cmd, "file")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if file != "" {
			for _, f := range []string{"kind", "resource", "args", "idempotency-key", "policy", "max-attempts", "priority", "at", "in", "mode", "shared", "limit", "debounce"} {
				if cmd.Flags().Changed(f) {
					return usagef("--file and --%s exclude each other: give each job's %s in the file", f, f)
				}
			}
			return a.jobsSubmitFile(file)
		}
		switch {
		case kind == "":
			return usagef("--kind is required")
		case len(resources.vals) == 0 || resources.vals[0] == "":
			return usagef("--resource is required")
		case at != "" && cmd.Flags().Changed("in"):
			return usagef("--at and --in exclude each other")
		case shared && mode == store.ModeExclusive:
			return usagef("--shared and --mode exclusive exclude each other")
		}
		if shared {
			mode = store.ModeShared
		}
		p := &store.SubmitParams{Kind: kind, Resource: resources.vals[0], IdempotencyKey: idem,
			Policy: store.BusyPolicy(policy), MaxAttempts: maxAttempts, Priority: priority, Delay: in,
			Mode: mode, Resources: resources.vals[1:], Limits: limits.vals, Debounce: debounce}
		if argsJSON != "" {
			p.Args = json.RawMessage(argsJSON)
		}
		if at != "" {
			t, err := time.Parse(time.RFC3339, at)
			if err != nil {
				return usagef("--at must be an RFC 3339 time, e.g. 2026-11-21T14:30:00Z (got %q)", at)
			}
			p.ScheduledAt = t
		}
		if err := p.Validate(); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		res, err := st.SubmitJob(ctx, p)
		if err != nil {
			return err
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, submitJSON{Job: wire.JobFrom(res.Job), Existing: res.Existing})
		}
		if res.Existing {
			fmt.Fprintf(a.stdout, "already submitted: job %d has idempotency key %q; nothing new was submitted\n",
				res.Job.ID, res.Job.IdempotencyKey)
		}
		if until, left, ok := res.Job.CooldownSkip(); ok && !res.Existing {
			fmt.Fprintf(a.stdout, "skipped: resource %s was recently remediated; it cools down for another %s (until %s)\n",
				printable(res.Job.Resource), roundDuration(left), until.UTC().Format("15:04:05Z"))
		}
		return writeJobTable(a.stdout, []*store.Job{res.Job})
	}
	return cmd
}
