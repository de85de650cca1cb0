package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

const dlqUsage = `Usage: baton dlq COMMAND [flags]

The dead letter queue: jobs discarded after their last attempt failed, a permanent failure,
or a refused state guard. They stay until retried or purged (or cleaned after the server's
retention, if it cleans discarded jobs).

Commands:
  list   list dead letters
  retry  run dead letters again (each at the back of its resource's queue)
  purge  delete dead letters (admin)

Run 'baton dlq COMMAND --help' for a command's flags.

` + jobExitCodesHelp + "\n"

func dlqCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	return runGroup("baton dlq", dlqUsage, map[string]subcommand{
		"list": dlqList, "ls": dlqList,
		"retry": dlqRetry,
		"purge": dlqPurge,
	}, args, g, stdout, stderr)
}

// dlqList is `baton dlq list`: jobs list of the dead letters.
func dlqList(args []string, g *globals, stdout, stderr io.Writer) int {
	return jobsList(args, g, stdout, stderr, true)
}

// parseJobIDs reads job ID arguments.
func parseJobIDs(c *command, pos []string) ([]int64, int, bool) {
	ids := make([]int64, 0, len(pos))
	for _, s := range pos {
		id, err := parseJobID(s)
		if err != nil {
			return nil, c.usageError("%v", err), false
		}
		ids = append(ids, id)
	}
	return ids, 0, true
}

func dlqRetry(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton dlq retry", `Usage: baton dlq retry ID... [-o table|json]

Run the jobs ID... again, as 'baton jobs retry' does for one: each becomes available at the
back of its resource's queue, with one more attempt if it had used them all. Every ID is tried;
the exit code is that of the first failure (3 no such job, 4 not in a state that can be
retried), and the jobs retried are printed.

Example:
  baton dlq list --kind deploy -o json | jq -r '.[].id' | xargs baton dlq retry

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	c.writes = true
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return c.usageError("missing job ID")
	}
	if err := g.check(); err != nil {
		return c.usageError("%v", err)
	}
	ids, code, ok := parseJobIDs(c, pos)
	if !ok {
		return code
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	var retried []*store.Job
	code = exitOK
	for _, id := range ids {
		job, err := js.RetryJob(ctx, id)
		if err != nil {
			if ec := c.jobFail(g, err, nil, fmt.Sprintf("job %d", id)); code == exitOK {
				code = ec
			}
			continue
		}
		retried = append(retried, job)
	}
	var err error
	switch {
	case g.output == "json":
		err = writeJSON(stdout, wire.JobsFrom(retried))
	case len(retried) > 0:
		err = writeJobTable(stdout, retried)
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return code
}

func dlqPurge(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton dlq purge", `Usage: baton dlq purge [ID...] [--kind K] [--resource R] [--yes] [-o table|json]

Delete dead letters (discarded jobs) for good, and say how many (admin). With IDs, only those
(jobs that are not discarded are left alone); --kind and --resource narrow the selection.
Without IDs, every dead letter that matches the filters is deleted: that needs --yes.

Examples:
  baton dlq purge 17 18
  baton dlq purge --kind deploy --yes

Output:
  purged 2 dead letters

With -o json: {"purged": 2}

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	c.writes = true
	kind := c.fs.String("kind", "", "only dead letters of kind `K`")
	resource := c.fs.String("resource", "", "only dead letters on resource `R`")
	yes := c.fs.Bool("yes", false, "purge without IDs: every dead letter that matches --kind and --resource")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if err := g.check(); err != nil {
		return c.usageError("%v", err)
	}
	ids, code, ok := parseJobIDs(c, pos)
	if !ok {
		return code
	}
	if len(ids) == 0 && !*yes {
		what := "every dead letter"
		if *kind != "" || *resource != "" {
			what = "every dead letter that matches the filters"
		}
		return c.usageError("refusing to purge %s without --yes (or name the job IDs)", what)
	}
	p := &store.PurgeParams{IDs: ids, Kind: *kind, Resource: *resource}
	if err := p.Validate(); err != nil {
		return c.jobFail(g, err, nil, "")
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(time.Minute) // a large purge may take a while
	defer cancel()
	n, err := js.PurgeJobs(ctx, p)
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	if g.output == "json" {
		err = writeJSON(stdout, map[string]int{"purged": n})
	} else if n == 1 {
		_, err = fmt.Fprintln(stdout, "purged 1 dead letter")
	} else {
		_, err = fmt.Fprintf(stdout, "purged %d dead letters\n", n)
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}
