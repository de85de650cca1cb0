package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
)

func (a *app) periodicCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "periodic COMMAND [flags]",
		Short: "periodic jobs (serve --periodic-file), next runs",
		Long: `Periodic jobs: jobs the server's maintenance leader submits at the start of every period of a
schedule, one job per period however many servers share the store. They are configured with
'baton serve --periodic-file FILE' (see 'baton serve --help' and docs/jobs.md), not over the
API: every server reads its own file at start.`,
	}, a.periodicListCommand())
}

func (a *app) periodicListCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:     "list [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list the server's periodic jobs with the start of their next period",
		Long: `List the periodic jobs of the server (its --periodic-file), by name, with when the next period
starts on the server's clock. Servers on one store are expected to share one file; the
maintenance leader's is the one that runs.

Output (table):
  NAME       SCHEDULE    KIND              RESOURCE  NEXT RUN
  reconcile  @every 30s  status.reconcile  app/web   2026-11-21T14:31:30Z (in 12s)

With -o json: an array of {"name", "schedule", "kind", "resource", "args", "policy",
"priority", "next_run"} (next_run absent if the schedule never fires again).`,
		Args: noArgs,
	}, meta{exits: exitsRead, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(*cobra.Command, []string) error {
		return a.withStore(func(ctx context.Context, st *client.Store) error {
			jobs, err := st.PeriodicJobs(ctx)
			if err != nil {
				return err
			}
			return writePeriodic(a.stdout, a.g, jobs, time.Now())
		})
	}
	return cmd
}

func writePeriodic(w io.Writer, g *globals, jobs []client.PeriodicJob, now time.Time) error {
	if g.output == "json" {
		out := make([]wire.PeriodicJob, len(jobs))
		for i := range jobs {
			out[i] = wire.PeriodicFrom(&jobs[i].PeriodicJob, jobs[i].NextRun)
		}
		return writeJSON(w, out)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSCHEDULE\tKIND\tRESOURCE\tNEXT RUN")
	for _, p := range jobs {
		next := "never"
		if !p.NextRun.IsZero() {
			next = fmt.Sprintf("%s (in %s)", p.NextRun.UTC().Format(time.RFC3339), max(p.NextRun.Sub(now), 0).Round(100*time.Millisecond))
		}
		// The schedule is printed as written: it passed the cron parser, and quoting "@every 1s" would
		// make it harder to read.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(p.Name), p.Schedule, printable(p.Kind),
			printable(p.Resource), next)
	}
	return tw.Flush()
}
