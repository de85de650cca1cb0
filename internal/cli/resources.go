package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) resourcesCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "resources COMMAND [flags]",
		Short: "resources' recorded states, and trees of resources",
		Long: `Inspect and set the recorded state of resources, the keys jobs work on. A resource's state is
what kinds' state guards check (from_states) and set (running, success and failure states);
its version is bumped by every change. Set, list and delete trees: key prefixes under which
"/" separates parents from children, for leases and jobs alike.`,
	},
		a.resourcesListCommand(),
		a.resourcesShowCommand(),
		a.resourcesSetStateCommand(),
		a.resourcesClearCooldownCommand(),
		a.resourcesSetTreeCommand(),
		a.resourcesDeleteTreeCommand(),
		a.resourcesTreesCommand(),
	)
}

const resourceOutputHelp = `Output (table):
  KEY      STATE     VERSION  RUNNING_JOB  UNFINISHED  UPDATED               COOLDOWN
  db/main  migrated  4        12           2           2026-11-21T14:31:34Z  -
  node-1   ""        0        -            0           2026-11-21T14:32:00Z  9m12s left (job 7)

With -o json: {"key", "state", "version", "updated_at", "running_job", "unfinished",
"cooldown"?: {"resource", "until", "remaining_ms", "job"}}.`

func (a *app) resourcesListCommand() *cobra.Command {
	var prefix string
	var limit int
	cmd := a.command(&cobra.Command{
		Use:     "list [--prefix P] [--limit N] [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list resources",
		Long: `List resources (every key a job was submitted to or a state was set on) in key order. Without
--limit, every page is fetched.

Example:
  baton resources list --prefix db/

` + resourceOutputHelp + ` A JSON array for list.`,
		Args: noArgs,
	}, meta{exits: exitsRead, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&prefix, "prefix", "", "only keys starting with `P`")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most `N` resources (1-1000), one page")
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		p := &store.ResourceListParams{Prefix: prefix, Limit: limit}
		if limit == 0 {
			p.Limit = listPageSize
		}
		if err := p.Validate(); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		var all []*store.Resource
		for {
			page, err := st.ListResources(ctx, p)
			if err != nil {
				return err
			}
			all = append(all, page...)
			if limit != 0 || len(page) < p.Limit {
				break
			}
			p.After = page[len(page)-1].Key
		}
		return writeResources(a.stdout, a.g, all)
	}
	return cmd
}

func (a *app) resourcesShowCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:     "show KEY [-o table|json]",
		Aliases: []string{"get"},
		Short:   "show one resource, who holds it and who waits for it",
		Long: `Show a resource's state and version, its running job and how many unfinished jobs it has; then,
on a server whose store keeps one line per key (SQLite, PostgreSQL), who holds it (a lease or
a running job), whether it rests ("resting until T (why)": cooldown, lock-delay or
resource-cooldown) and its line: the waiting lock requests and jobs in the order they will be
granted (the first 100; all of them: baton locks waiters KEY --limit N). A key locked but
never given a job or a state is shown too, at state "" and version 0. Exit code 3 if nothing
was ever recorded for KEY and nobody holds it, waits for it or it rests.

Example:
  baton resources show db/main

` + resourceOutputHelp + `

Then (a server with a line):
  held by ci-runner-7 (token 42, expires 2026-11-21T14:31:49Z, 14s left)
  line (4 waiting, the front first):
` + lineOutputHelp + `

With -o json, the resource object also has "holder"?, "rest"? and "line" (docs/http-api.md).`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsLookup, names: flagNames{"resource": "KEY"}})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := store.ValidateResource(args[0]); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		r, l, err := st.GetResourceLine(ctx, args[0], defaultLineLimit)
		if err != nil {
			return notFound(err, fmt.Sprintf("resource %q", args[0]))
		}
		if a.g.output == "json" {
			out := wire.ResourceFrom(r)
			if l != nil {
				out.LineFrom(l, time.Now())
			}
			return writeJSON(a.stdout, out)
		}
		if err := writeResources(a.stdout, a.g, []*store.Resource{r}); err != nil || l == nil {
			return err
		}
		return writeResourceLine(a.stdout, r.Key, l)
	}
	return cmd
}

func (a *app) resourcesSetStateCommand() *cobra.Command {
	var ifVersion int64
	cmd := a.command(&cobra.Command{
		Use:   "set-state KEY STATE [--if-version N] [-o table|json]",
		Short: "set a resource's state (admin)",
		Long: `Set a resource's state (admin), creating the resource if needed, and print it. With
--if-version, only if the resource is at version N (a compare-and-set; a resource never
recorded is at version 0): exit code 4 if it is not. Use it to repair a resource that a
failed job left in a failure state, before retrying the job.

Example:
  baton resources set-state db/main migrated --if-version 4

` + resourceOutputHelp,
		Args: exactArgs(2, "KEY and STATE"),
	}, meta{exits: exitsJobOp, writes: true, names: flagNames{"resource": "KEY", "state": "STATE"}})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().Int64Var(&ifVersion, "if-version", 0, "only if the resource's version is `N`")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p := &store.SetResourceStateParams{Key: args[0], State: args[1]}
		if cmd.Flags().Changed("if-version") {
			if ifVersion < 0 {
				return usagef("--if-version must not be negative")
			}
			p.IfVersion = &ifVersion
		}
		if err := p.Validate(); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		r, err := st.SetResourceState(ctx, p)
		if err != nil {
			return notFound(err, fmt.Sprintf("resource %q", p.Key))
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, wire.ResourceFrom(r))
		}
		return writeResources(a.stdout, a.g, []*store.Resource{r})
	}
	return cmd
}

func writeResources(w io.Writer, g *globals, rs []*store.Resource) error {
	if g.output == "json" {
		out := make([]wire.Resource, len(rs))
		for i, r := range rs {
			out[i] = wire.ResourceFrom(r)
		}
		return writeJSON(w, out)
	}
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no resources")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "KEY\tSTATE\tVERSION\tRUNNING_JOB\tUNFINISHED\tUPDATED\tCOOLDOWN")
	for _, r := range rs {
		running := "-"
		if r.RunningJob != 0 {
			running = strconv.FormatInt(r.RunningJob, 10)
		}
		state := `""` // never set
		if r.State != "" {
			state = printable(r.State)
		}
		cooldown := "-"
		if c := r.Cooldown; c != nil {
			cooldown = fmt.Sprintf("%s left (job %d)", roundDuration(c.Left), c.Job)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", printable(r.Key), state, r.Version, running,
			r.Unfinished, formatTime(r.UpdatedAt), cooldown)
	}
	return tw.Flush()
}
