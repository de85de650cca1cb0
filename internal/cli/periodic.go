package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
)

const periodicUsage = `Usage: baton periodic list [-o table|json]

Periodic jobs: jobs the server's maintenance leader submits at the start of every period of a
schedule, one job per period however many servers share the store. They are configured with
'baton serve --periodic-file FILE' (see 'baton serve --help' and docs/jobs.md), not over the
API: every server reads its own file at start.

Commands:
  list  list the server's periodic jobs with the start of their next period

` + jobExitCodesHelp + "\n"

func periodicCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	return runGroup("baton periodic", periodicUsage, map[string]subcommand{
		"list": periodicList, "ls": periodicList,
	}, args, g, stdout, stderr)
}

func periodicList(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton periodic list", `Usage: baton periodic list [-o table|json]

List the periodic jobs of the server (its --periodic-file), by name, with when the next period
starts on the server's clock. Servers on one store are expected to share one file; the
maintenance leader's is the one that runs.

Output (table):
  NAME       SCHEDULE    KIND              RESOURCE  NEXT RUN
  reconcile  @every 30s  status.reconcile  app/web   2026-11-21T14:31:30Z (in 12s)

With -o json: an array of {"name", "schedule", "kind", "resource", "args", "policy",
"priority", "next_run"} (next_run absent if the schedule never fires again).

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	jobs, err := st.PeriodicJobs(ctx)
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	if err := writePeriodic(stdout, g, jobs, time.Now()); err != nil {
		return c.fail(g, err)
	}
	return exitOK
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
