package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// statsStates are the states GET /v1/jobs/counts counts: the unfinished ones.
var statsStates = []store.JobState{store.JobScheduled, store.JobAvailable, store.JobRunning, store.JobRetryable}

func (a *app) jobsStatsCommand() *cobra.Command {
	kinds := &listFlag{split: true}
	cmd := a.command(&cobra.Command{
		Use:   "stats [--kind K] [-o table|json]",
		Short: "count unfinished jobs per kind and state",
		Long: `Count the unfinished jobs per kind and state (the numbers the dashboard shows). Finished jobs
are not counted: list them with 'baton jobs list --state S', and the dead letters with
'baton dlq list'.

Example:
  baton jobs stats

Output (table):
  KIND    SCHEDULED  AVAILABLE  RUNNING  RETRYABLE  TOTAL
  build   0          12         4        1          17
  deploy  2          0          1        0          3
  TOTAL   2          12         5        1          20

With -o json, the answer of GET /v1/jobs/counts: {"counts": [{"kind", "state", "count"}]}.`,
		Args: noArgs,
	}, meta{exits: exitsRead, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().Var(kinds, "kind", "only kind `K` (repeat, or separate with commas, for several)")
	cmd.RunE = func(*cobra.Command, []string) error {
		for _, k := range kinds.vals {
			if err := store.ValidateKind(k); err != nil {
				return err
			}
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		counts, err := st.JobCounts(ctx)
		if err != nil {
			return err
		}
		resp := wire.JobCountsResponse{Counts: []wire.JobCount{}}
		for _, n := range counts {
			if len(kinds.vals) == 0 || slices.Contains(kinds.vals, n.Kind) {
				resp.Counts = append(resp.Counts, wire.JobCount{Kind: n.Kind, State: n.State, Count: n.Count})
			}
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, resp)
		}
		return writeStats(a.stdout, resp.Counts)
	}
	return cmd
}

// writeStats prints counts as one row per kind and a column per unfinished state, with totals.
func writeStats(w io.Writer, counts []wire.JobCount) error {
	if len(counts) == 0 {
		_, err := fmt.Fprintln(w, "no unfinished jobs")
		return err
	}
	var kinds []string
	per := map[string]map[store.JobState]int64{}
	for _, n := range counts {
		if per[n.Kind] == nil {
			per[n.Kind] = map[store.JobState]int64{}
			kinds = append(kinds, n.Kind)
		}
		per[n.Kind][n.State] += n.Count
	}
	slices.Sort(kinds)
	tw := newTable(w)
	fmt.Fprint(tw, "KIND")
	for _, s := range statsStates {
		fmt.Fprintf(tw, "\t%s", upper(string(s)))
	}
	fmt.Fprintln(tw, "\tTOTAL")
	totals := map[store.JobState]int64{}
	row := func(name string, m map[store.JobState]int64) {
		var sum int64
		fmt.Fprint(tw, name)
		for _, s := range statsStates {
			fmt.Fprintf(tw, "\t%d", m[s])
			sum += m[s]
		}
		fmt.Fprintf(tw, "\t%s\n", strconv.FormatInt(sum, 10))
	}
	for _, k := range kinds {
		row(printable(k), per[k])
		for s, n := range per[k] {
			totals[s] += n
		}
	}
	row("TOTAL", totals)
	return tw.Flush()
}

// upper is a state's column title.
func upper(s string) string { return strings.ToUpper(s) }
