package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) dlqCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "dlq COMMAND [flags]",
		Short: "the dead letters (discarded jobs)",
		Long: `The dead letter queue: jobs discarded after their last attempt failed, a permanent failure,
or a refused state guard. They stay until retried or purged (or cleaned after the server's
retention, if it cleans discarded jobs).`,
	},
		a.jobsListCommand(true),
		a.dlqRetryCommand(),
		a.dlqPurgeCommand(),
	)
}

func (a *app) dlqRetryCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "retry ID... [-o table|json]",
		Short: "run dead letters again (each at the back of its resource's queue)",
		Long: `Run the jobs ID... again, as 'baton jobs retry' does for one: each becomes available at the
back of its resource's queue, with one more attempt if it had used them all. Every ID is tried;
the exit code is that of the first failure (3 no such job, 4 not in a state that can be
retried), and the jobs retried are printed.

Example:
  baton dlq list --kind deploy -o json | jq -r '.[].id' | xargs baton dlq retry`,
		Args: minArgs("job ID"),
	}, meta{exits: exitsJobOp, writes: true, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ids, err := parseJobIDs(args)
		if err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		var retried []*store.Job
		var first error // the exit code is the first failure's; each is reported as it comes
		for _, id := range ids {
			job, err := st.RetryJob(ctx, id)
			if err != nil {
				err = notFound(err, fmt.Sprintf("job %d", id))
				a.report(cmd, err)
				if first == nil {
					first = &reported{err}
				}
				continue
			}
			retried = append(retried, job)
		}
		switch {
		case a.g.output == "json":
			err = writeJSON(a.stdout, wire.JobsFrom(retried))
		case len(retried) > 0:
			err = writeJobTable(a.stdout, retried)
		}
		if err != nil {
			return err
		}
		return first
	}
	return cmd
}

func (a *app) dlqPurgeCommand() *cobra.Command {
	var kind, resource string
	var yes bool
	cmd := a.command(&cobra.Command{
		Use:   "purge [ID...] [--kind K] [--resource R] [--yes] [-o table|json]",
		Short: "delete dead letters (admin)",
		Long: `Delete dead letters (discarded jobs) for good, and say how many (admin). With IDs, only those
(jobs that are not discarded are left alone); --kind and --resource narrow the selection.
Without IDs, every dead letter that matches the filters is deleted: that needs --yes.

Examples:
  baton dlq purge 17 18
  baton dlq purge --kind deploy --yes

Output:
  purged 2 dead letters

With -o json: {"purged": 2}`,
	}, meta{exits: exitsRead, writes: true, names: jobNames})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&kind, "kind", "", "only dead letters of kind `K`")
	fs.StringVar(&resource, "resource", "", "only dead letters on resource `R`")
	fs.BoolVar(&yes, "yes", false, "purge without IDs: every dead letter that matches --kind and --resource")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		ids, err := parseJobIDs(args)
		if err != nil {
			return err
		}
		if len(ids) == 0 && !yes {
			what := "every dead letter"
			if kind != "" || resource != "" {
				what = "every dead letter that matches the filters"
			}
			return usagef("refusing to purge %s without --yes (or name the job IDs)", what)
		}
		p := &store.PurgeParams{IDs: ids, Kind: kind, Resource: resource}
		if err := p.Validate(); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(time.Minute) // a large purge may take a while
		if err != nil {
			return err
		}
		defer done()
		n, err := st.PurgeJobs(ctx, p)
		if err != nil {
			return err
		}
		switch {
		case a.g.output == "json":
			err = writeJSON(a.stdout, map[string]int{"purged": n})
		case n == 1:
			_, err = fmt.Fprintln(a.stdout, "purged 1 dead letter")
		default:
			_, err = fmt.Fprintf(a.stdout, "purged %d dead letters\n", n)
		}
		return err
	}
	return cmd
}
