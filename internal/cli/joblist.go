package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// maxFilterCombos bounds the queries one listing may fan out to (states × kinds × resources).
const maxFilterCombos = 64

// jobFilters are the values of a listing's --state, --kind and --resource; an empty list is
// no filter.
type jobFilters struct {
	states, kinds, resources []string
}

// params returns one JobListParams per combination of the filters' values, each validated, so
// that bad input is refused before anything is asked of the server.
func (f jobFilters) params(after int64, limit int) ([]*store.JobListParams, error) {
	orAny := func(v []string) []string {
		if len(v) == 0 {
			return []string{""}
		}
		return v
	}
	var out []*store.JobListParams
	for _, s := range orAny(f.states) {
		for _, k := range orAny(f.kinds) {
			for _, r := range orAny(f.resources) {
				p := &store.JobListParams{State: store.JobState(s), Kind: k, Resource: r, After: after, Limit: limit}
				if err := p.Validate(); err != nil {
					return nil, err
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// listJobsAny lists the jobs matching any of ps (which differ only in their filters), one page
// in ID order: the first Limit IDs after After of their union. The filters' combinations are
// disjoint (a job has one state, kind and resource), and each query's first Limit IDs include
// every ID of the union's first Limit that it matches, so the merge is exact.
func listJobsAny(ctx context.Context, js store.JobStore, ps []*store.JobListParams) ([]*store.Job, error) {
	if len(ps) == 1 {
		return js.ListJobs(ctx, ps[0])
	}
	var all []*store.Job
	for _, p := range ps {
		page, err := js.ListJobs(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
	}
	slices.SortFunc(all, func(a, b *store.Job) int { return int(min(max(a.ID-b.ID, -1), 1)) })
	all = slices.CompactFunc(all, func(a, b *store.Job) bool { return a.ID == b.ID })
	if limit := ps[0].Limit; len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// jobStateNames are the values of --state.
func jobStateNames() []string {
	out := make([]string, len(store.JobStates))
	for i, s := range store.JobStates {
		out[i] = string(s)
	}
	return out
}

const jobsListHelp = `List jobs in ID order (oldest first), one page: at most --limit (default 100, at most 1000). If
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

With -o json, a JSON array of jobs as in 'baton jobs show -o json'.`

const dlqListHelp = `List the dead letters: jobs discarded after their last attempt failed, a permanent failure
(CMD exit code 65 under 'baton worker'), or a refused state guard. One page, in ID order: at
most --limit (default 100, at most 1000); if the page is full, stderr says how to get the next.
Retry them with 'baton dlq retry', delete them with 'baton dlq purge'.

Output (table):
  ID  KIND    RESOURCE  STATE      ATTEMPT  CREATED               INFO
  17  deploy  svc/api   discarded  3/3      2026-11-21T14:31:34Z  handler_error: exit status 1; stderr: …`

// jobsListCommand is 'baton jobs list', and 'baton dlq list' (dlq: only discarded jobs).
func (a *app) jobsListCommand(dlq bool) *cobra.Command {
	states, kinds, resources := &listFlag{split: true}, &listFlag{split: true}, &listFlag{}
	var limit int
	var after int64
	cmd := &cobra.Command{
		Use:     "list [--state S] [--kind K] [--resource R] [--limit N] [--after ID] [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list jobs, by ID",
		Long:    jobsListHelp,
		Args:    noArgs,
	}
	if dlq {
		cmd.Use = "list [--kind K] [--resource R] [--limit N] [--after ID] [-o table|json]"
		cmd.Short, cmd.Long = "list dead letters", dlqListHelp
	}
	a.command(cmd, meta{exits: exitsRead, names: jobNames})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	if !dlq {
		fs.Var(states, "state", "only jobs in state `S` (repeat, or separate with commas, for several)")
		enumFlag(cmd, "state", jobStateNames()...)
	}
	fs.Var(kinds, "kind", "only jobs of kind `K` (repeat, or separate with commas, for several)")
	fs.Var(resources, "resource", "only jobs on resource `R` (repeat for several)")
	fs.IntVar(&limit, "limit", 0, "at most `N` jobs (1-1000; default 100)")
	fs.Int64Var(&after, "after", 0, "only jobs with an ID greater than `ID` (the next page)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		filters := jobFilters{states: states.vals, kinds: kinds.vals, resources: resources.vals}
		if dlq {
			filters.states = []string{string(store.JobDiscarded)}
		}
		if n := max(len(filters.states), 1) * max(len(filters.kinds), 1) * max(len(filters.resources), 1); n > maxFilterCombos {
			return usagef("--state × --kind × --resource make %d combinations; at most %d", n, maxFilterCombos)
		}
		ps, err := filters.params(after, limit)
		if err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		jobs, err := listJobsAny(ctx, st, ps)
		if err != nil {
			return err
		}
		switch {
		case a.g.output == "json":
			err = writeJSON(a.stdout, wire.JobsFrom(jobs))
		case len(jobs) == 0 && dlq:
			_, err = fmt.Fprintln(a.stdout, "no dead letters")
		case len(jobs) == 0:
			_, err = fmt.Fprintln(a.stdout, "no jobs")
		default:
			err = writeJobTable(a.stdout, jobs)
		}
		if err != nil {
			return err
		}
		if len(jobs) == ps[0].Limit && a.g.output != "json" {
			fmt.Fprintf(a.stderr, "%s: more jobs may follow: add --after %d for the next page\n", cmd.CommandPath(), jobs[len(jobs)-1].ID)
		}
		return nil
	}
	return cmd
}
