package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) jobsCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "jobs COMMAND [flags]",
		Short: "submit and manage jobs",
		Long: `Submit and manage jobs on a baton server. Jobs on one resource run one at a time, in
submission order; run them with 'baton worker'. See also 'baton dlq', 'baton resources' and
'baton kinds'.`,
	},
		a.jobsSubmitCommand(),
		a.jobsListCommand(false),
		a.jobsShowCommand(),
		a.jobsExplainCommand(),
		a.jobsCancelCommand(),
		a.jobsRetryCommand(),
		a.jobsStatsCommand(),
	)
}

// jobNames is the meta.names of a job command whose store fields are its flags' names.
var jobNames = flagNames{}

// parseJobID reads a job ID argument.
func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("job ID must be a positive integer (got %q)", s)
	}
	return id, nil
}

// parseJobIDs reads job ID arguments.
func parseJobIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, s := range args {
		id, err := parseJobID(s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (a *app) jobsShowCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:     "show ID [-o table|json]",
		Aliases: []string{"get"},
		Short:   "show a job, with its error history",
		Long: `Show a job: its state, attempts, schedule, lease (worker, fencing token, expiry) and the error
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
"lease_expires_at", "cancel_requested", "timeout_ms"} (empty fields left out).`,
		Args: exactArgs(1, "job ID"),
	}, meta{exits: exitsLookup, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		id, err := parseJobID(args[0])
		if err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		job, err := st.GetJob(ctx, id)
		if err != nil {
			return notFound(err, fmt.Sprintf("job %d", id))
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, wire.JobFrom(job))
		}
		return writeJobDetail(a.stdout, job)
	}
	return cmd
}

func (a *app) jobsCancelCommand() *cobra.Command {
	return a.jobAction(&cobra.Command{
		Use:   "cancel ID [-o table|json]",
		Short: "cancel a job (a running one stops at its worker's next heartbeat)",
		Long: `Cancel a job and print it. A job that is not running is cancelled at once. For a running job
a cancel is requested: its worker sees the request at its next heartbeat and stops the work
('baton worker' sends CMD SIGTERM), and the job ends cancelled; the resource stays locked until
then. Exit code 4 if the job has finished already, 3 if there is no such job.

Example:
  baton jobs cancel 12`,
	}, func(ctx context.Context, js store.JobStore, id int64) (*store.Job, error) {
		return js.CancelJob(ctx, id)
	})
}

func (a *app) jobsRetryCommand() *cobra.Command {
	return a.jobAction(&cobra.Command{
		Use:   "retry ID [-o table|json]",
		Short: "run a discarded, cancelled or skipped job again, or a retryable one now",
		Long: `Run a job again and print it: a discarded, cancelled or skipped job becomes available at the
back of its resource's queue (with one more attempt if it had used them all); a retryable job
becomes claimable now instead of after its backoff. Exit code 4 for a job in another state,
3 if there is no such job.

Example:
  baton jobs retry 17`,
	}, func(ctx context.Context, js store.JobStore, id int64) (*store.Job, error) {
		return js.RetryJob(ctx, id)
	})
}

// jobAction declares a command on one job ID that prints the job it returns.
func (a *app) jobAction(cmd *cobra.Command, do func(context.Context, store.JobStore, int64) (*store.Job, error)) *cobra.Command {
	cmd.Args = exactArgs(1, "job ID")
	a.command(cmd, meta{exits: exitsJobOp, writes: true, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseJobID(args[0])
		if err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		job, err := do(ctx, st, id)
		if err != nil {
			return notFound(err, fmt.Sprintf("job %d", id))
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, wire.JobFrom(job))
		}
		if err := writeJobTable(a.stdout, []*store.Job{job}); err != nil {
			return err
		}
		if cmd.Name() == "cancel" && job.State == store.JobRunning {
			_, err = fmt.Fprintf(a.stdout, "job %d is running: cancel requested; it ends when its worker stops it\n", job.ID)
		}
		return err
	}
	return cmd
}
