package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Rates of key prefixes: every grant of a key under a rated prefix counts against its rate
// (rates set, list, delete). A kind's rate is 'kinds set --rate', a limit's 'limits set --rate'.

const ratesHelp = `A rate MAX/WINDOW, such as 20/1m, on a key prefix such as cluster/: at most MAX grants of keys
that start with the prefix (leases and job attempts; a request of several such keys counts
once) in any sliding window of WINDOW (units s, m, h, d), on the store's clock. A lock request
over the rate waits (or, without --wait, fails naming the rate and when it frees); a job stays
its resource's head until the window frees, or is skipped (rate_limited) under the skip policy.
MAX 1 to 1000000, WINDOW 1s to 30d. Rated prefixes may not overlap (one starting with another).
SQLite and PostgreSQL stores only (others: exit code 1, naming the store).`

var rateNames = flagNames{"prefix": "PREFIX", "rate": "RATE", "rate.max": "RATE", "rate.window": "RATE"}

func (a *app) ratesCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "rates COMMAND [flags]",
		Short: "set, list and delete rates of key prefixes",
		Long: `Set, list and delete rates of key prefixes on a baton server.

` + ratesHelp,
	},
		a.ratesSetCommand(),
		a.ratesListCommand(),
		a.ratesDeleteCommand(),
	)
}

func (a *app) ratesSetCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "set PREFIX RATE [-o table|json]",
		Short: "set or change the rate of a key prefix (admin)",
		Long: `Set the rate RATE (MAX/WINDOW) of the key prefix PREFIX, or change it (admin role). Grants
made before it do not count. A bad RATE or a PREFIX overlapping another rated prefix: exit
code 2, naming it.

` + ratesHelp + `

Example:
  baton rates set cluster/ 20/1m

Output:
  rate 20/1m on prefix cluster/ set at 2026-11-21T14:31:34Z
With -o json, the prefix rate object (docs/http-api.md).`,
		Args: exactArgs(2, "PREFIX RATE"),
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitAuth}, writes: true, names: rateNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		r, err := store.ParseRate("rate", args[1])
		if err != nil {
			return err
		}
		p := &store.SetPrefixRateParams{Prefix: args[0], Rate: r, Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			pr, err := st.SetPrefixRate(ctx, p)
			if err != nil {
				return err
			}
			if a.g.output == "json" {
				return writeJSON(a.stdout, wire.PrefixRateFrom(pr))
			}
			_, err = fmt.Fprintf(a.stdout, "rate %s on prefix %s set at %s\n", pr.Rate, printable(pr.Prefix), formatTime(pr.SetAt))
			return err
		})
	}
	return cmd
}

func (a *app) ratesDeleteCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "delete PREFIX",
		Short: "remove the rate of a key prefix (admin)",
		Long: `Remove the rate of the key prefix PREFIX (admin role): its keys are no longer counted. Exit
code 3 if PREFIX has no rate.

Example:
  baton rates delete cluster/`,
		Args: exactArgs(1, "PREFIX"),
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitNotFound, exitAuth}, writes: true, names: rateNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		p := &store.DeletePrefixRateParams{Prefix: args[0], Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			err := st.DeletePrefixRate(ctx, p)
			if errors.Is(err, store.ErrNotFound) {
				return explain(err, "no rate on prefix %q", p.Prefix)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "deleted the rate of prefix %s\n", printable(p.Prefix))
			return err
		})
	}
	return cmd
}

func (a *app) ratesListCommand() *cobra.Command {
	var limit int
	cmd := a.command(&cobra.Command{
		Use:     "list [--limit N] [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list rated key prefixes",
		Long: `List the rated key prefixes in prefix order. Without --limit, every page is fetched.

Example:
  baton rates list

Output (table):
  PREFIX    RATE   SET_AT
  cluster/  20/1m  2026-11-21T14:31:34Z

With -o json, a JSON array of prefix rate objects (docs/http-api.md).`,
		Args: noArgs,
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().IntVar(&limit, "limit", 0, "at most `N` prefixes (1-1000), one page")
	cmd.RunE = func(_ *cobra.Command, _ []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		return a.withStore(func(ctx context.Context, st *client.Store) error {
			all, err := listPages(limit, func(after string, n int) ([]*store.PrefixRate, error) {
				return st.PrefixRates(ctx, &store.PrefixRatesParams{After: after, Limit: n})
			}, func(r *store.PrefixRate) string { return r.Prefix })
			if err != nil {
				return err
			}
			if a.g.output == "json" {
				out := make([]wire.PrefixRate, 0, len(all))
				for _, r := range all {
					out = append(out, wire.PrefixRateFrom(r))
				}
				return writeJSON(a.stdout, out)
			}
			tw := newTable(a.stdout)
			fmt.Fprintln(tw, "PREFIX\tRATE\tSET_AT")
			for _, r := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(r.Prefix), r.Rate, formatTime(r.SetAt))
			}
			return tw.Flush()
		})
	}
	return cmd
}
