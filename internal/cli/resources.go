package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

const resourcesUsage = `Usage: baton resources COMMAND [flags]

Inspect and set the recorded state of resources, the keys jobs work on. A resource's state is
what kinds' state guards check (from_states) and set (running, success and failure states);
its version is bumped by every change.

Commands:
  list       list resources
  show       show one resource
  set-state       set a resource's state (admin)
  clear-cooldown  end a resource's cooldown early (admin)

Run 'baton resources COMMAND --help' for a command's flags.

` + jobExitCodesHelp + "\n"

func resourcesCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	return runGroup("baton resources", resourcesUsage, map[string]subcommand{
		"list": resourcesList, "ls": resourcesList,
		"show": resourcesShow, "get": resourcesShow,
		"set-state":      resourcesSetState,
		"clear-cooldown": resourcesClearCooldown,
	}, args, g, stdout, stderr)
}

const resourceOutputHelp = `Output (table):
  KEY      STATE     VERSION  RUNNING_JOB  UNFINISHED  UPDATED               COOLDOWN
  db/main  migrated  4        12           2           2026-11-21T14:31:34Z  -
  node-1   ""        0        -            0           2026-11-21T14:32:00Z  9m12s left (job 7)

With -o json: {"key", "state", "version", "updated_at", "running_job", "unfinished",
"cooldown"?: {"resource", "until", "remaining_ms", "job"}}.`

func resourcesList(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton resources list", `Usage: baton resources list [--prefix P] [--limit N] [-o table|json]

List resources (every key a job was submitted to or a state was set on) in key order. Without
--limit, every page is fetched.

Example:
  baton resources list --prefix db/

`+resourceOutputHelp+` A JSON array for list.

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	prefix := c.fs.String("prefix", "", "only keys starting with `P`")
	limit := c.fs.Int("limit", 0, "at most `N` resources (1-1000), one page")
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	if *limit < 0 || *limit > store.MaxListLimit {
		return c.usageError("--limit must be between 1 and %d", store.MaxListLimit)
	}
	p := &store.ResourceListParams{Prefix: *prefix, Limit: *limit}
	if *limit == 0 {
		p.Limit = listPageSize
	}
	if err := p.Validate(); err != nil {
		return c.jobFail(g, err, nil, "")
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	var all []*store.Resource
	for {
		page, err := js.ListResources(ctx, p)
		if err != nil {
			return c.jobFail(g, err, nil, "")
		}
		all = append(all, page...)
		if *limit != 0 || len(page) < p.Limit {
			break
		}
		p.After = page[len(page)-1].Key
	}
	if err := writeResources(stdout, g, all); err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}

func resourcesShow(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton resources show", `Usage: baton resources show KEY [-o table|json]

Show a resource's state and version, its running job and how many unfinished jobs it has.
Exit code 3 if nothing was ever recorded for KEY.

Example:
  baton resources show db/main

`+resourceOutputHelp+`

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	if err := store.ValidateResource(pos[0]); err != nil {
		return c.jobFail(g, err, flagNames{"resource": "KEY"}, "")
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	r, err := js.GetResource(ctx, pos[0])
	if err != nil {
		return c.jobFail(g, err, nil, fmt.Sprintf("resource %q", pos[0]))
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.ResourceFrom(r))
	} else {
		err = writeResources(stdout, g, []*store.Resource{r})
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}

func resourcesSetState(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton resources set-state", `Usage: baton resources set-state KEY STATE [--if-version N] [-o table|json]

Set a resource's state (admin), creating the resource if needed, and print it. With
--if-version, only if the resource is at version N (a compare-and-set; a resource never
recorded is at version 0): exit code 4 if it is not. Use it to repair a resource that a
failed job left in a failure state, before retrying the job.

Example:
  baton resources set-state db/main migrated --if-version 4

`+resourceOutputHelp+`

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	c.writes = true
	ifVersion := c.fs.Int64("if-version", 0, "only if the resource's version is `N`")
	pos, code, ok := clientCommand(c, g, args, 2, "KEY and STATE")
	if !ok {
		return code
	}
	p := &store.SetResourceStateParams{Key: pos[0], State: pos[1]}
	if flagSet(c.fs, "if-version") {
		if *ifVersion < 0 {
			return c.usageError("--if-version must not be negative")
		}
		p.IfVersion = ifVersion
	}
	names := flagNames{"resource": "KEY", "state": "STATE"}
	if err := p.Validate(); err != nil {
		return c.jobFail(g, err, names, "")
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	r, err := js.SetResourceState(ctx, p)
	if err != nil {
		return c.jobFail(g, err, names, fmt.Sprintf("resource %q", p.Key))
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.ResourceFrom(r))
	} else {
		err = writeResources(stdout, g, []*store.Resource{r})
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
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
