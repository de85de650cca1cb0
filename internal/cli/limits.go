package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Limits: named capacities of which a lease takes one unit each (baton run --limit NAME).

func (a *app) limitsCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "limits COMMAND [flags]",
		Short: "set, list and delete limits (capacities shared by leases)",
		Long: `Set, list and delete limits on a baton server. A limit NAME of capacity N lets at most N
leases hold a unit of it at once; a lease takes a unit with 'baton run --limit NAME' (or
'baton locks acquire --limit NAME'), and waits while the limit is full. SQLite and PostgreSQL
stores only.`,
	},
		a.limitsSetCommand(),
		a.limitsListCommand(),
		a.limitsDeleteCommand(),
	)
}

func (a *app) limitsSetCommand() *cobra.Command {
	var rate string
	cmd := a.command(&cobra.Command{
		Use:   "set NAME N [--rate MAX/WINDOW] [-o table|json]",
		Short: "create a limit or change its capacity and rate (admin)",
		Long: `Create the limit NAME with capacity N (1 to 1000000), or change its capacity (admin role).
Lowering it below the units in use evicts nobody: new grants wait until the use drops below N.

--rate MAX/WINDOW, such as 20/1m: at most MAX grants of a unit of the limit (leases and job
attempts that take one) in any sliding window of WINDOW (units s, m, h, d), on the store's clock.
A lock request over the rate waits (or, without --wait, fails naming the rate and when it
frees); a job stays its resource's head until the window frees, or is skipped (rate_limited)
under the skip policy. MAX 1 to 1000000, WINDOW 1s to 30d. Without --rate, the limit has none
(a set without it removes the rate). A limit used only as a rate: capacity 1000000.

Example:
  baton limits set gpu-pool 4
  baton limits set cloud-api 1000000 --rate 20/1m

Output:
  limit gpu-pool: capacity 4, 1 in use, 0 waiting
  limit cloud-api: capacity 1000000, rate 20/1m, 0 in use, 0 waiting
With -o json, the limit object (docs/http-api.md).`,
		Args: exactArgs(2, "NAME N"),
	}, meta{exits: exitsRead, names: flagNames{"rate": "--rate", "rate.max": "--rate", "rate.window": "--rate"}})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&rate, "rate", "", "at most MAX grants of its units in a sliding WINDOW, `MAX/WINDOW` such as 20/1m")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return &store.InvalidArgumentError{Field: "capacity", Rule: fmt.Sprintf("must be an integer between 1 and %d (got %q)", store.MaxLimitCapacity, args[1])}
		}
		p := &store.SetLimitParams{Name: args[0], Capacity: n, Actor: a.actor()}
		if rate != "" {
			r, err := store.ParseRate("rate", rate)
			if err != nil {
				return err
			}
			p.Rate = &r
		}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			l, err := st.SetLimit(ctx, p)
			if err != nil {
				return err
			}
			if a.g.output == "json" {
				return writeJSON(a.stdout, wire.LimitFrom(l, wire.LeaseFrom))
			}
			rated := ""
			if l.Rate != nil {
				rated = ", rate " + l.Rate.String()
			}
			_, err = fmt.Fprintf(a.stdout, "limit %s: capacity %d%s, %d in use, %d waiting\n", printable(l.Name), l.Capacity, rated, l.InUse, l.Waiting)
			return err
		})
	}
	return cmd
}

func (a *app) limitsListCommand() *cobra.Command {
	var limit int
	cmd := a.command(&cobra.Command{
		Use:     "list [--limit N] [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list limits with their use",
		Long: `List limits in name order, each with the units in use, its capacity, the holders of its
units and the number of requests waiting for one. Without --limit, every page is fetched.

Example:
  baton limits list

Output (table):
  NAME       USED  LIMIT    HOLDERS          WAITING  RATE
  cloud-api  0     1000000  -                0        20/1m
  gpu-pool   2     4        train-a,train-b  0        -
(the RATE column only when a limit has a rate)

With -o json, a JSON array of limit objects (docs/http-api.md).`,
		Args: noArgs,
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().IntVar(&limit, "limit", 0, "at most `N` limits (1-1000), one page")
	cmd.RunE = func(_ *cobra.Command, _ []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		return a.withStore(func(ctx context.Context, st *client.Store) error {
			all, err := listPages(limit, func(after string, n int) ([]*store.Limit, error) {
				return st.Limits(ctx, &store.LimitsParams{After: after, Limit: n})
			}, func(l *store.Limit) string { return l.Name })
			if err != nil {
				return err
			}
			if a.g.output == "json" {
				out := make([]wire.Limit, 0, len(all))
				for _, l := range all {
					out = append(out, wire.LimitFrom(l, wire.LeaseFrom))
				}
				return writeJSON(a.stdout, out)
			}
			tw := newTable(a.stdout)
			// The RATE column only when a limit has a rate, last: the columns before it stay
			// where scripts read them.
			anyRate := slices.ContainsFunc(all, func(l *store.Limit) bool { return l.Rate != nil })
			if anyRate {
				fmt.Fprintln(tw, "NAME\tUSED\tLIMIT\tHOLDERS\tWAITING\tRATE")
			} else {
				fmt.Fprintln(tw, "NAME\tUSED\tLIMIT\tHOLDERS\tWAITING")
			}
			for _, l := range all {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d", printable(l.Name), l.InUse, l.Capacity, holderNames(l.Holders), l.Waiting)
				switch {
				case !anyRate:
				case l.Rate != nil:
					fmt.Fprintf(tw, "\t%s", l.Rate)
				default:
					fmt.Fprint(tw, "\t-")
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		})
	}
	return cmd
}

// holderNames is a table cell of a limit's holders: their names, at most three, then how many
// more; "-" for none.
func holderNames(ls []*store.Lease) string {
	if len(ls) == 0 {
		return "-"
	}
	var names []string
	for i, l := range ls {
		if i == 3 {
			names = append(names, fmt.Sprintf("+%d", len(ls)-3))
			break
		}
		names = append(names, printable(l.Holder))
	}
	return strings.Join(names, ",")
}

func (a *app) limitsDeleteCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "delete NAME",
		Short: "delete a limit no lease holds (admin)",
		Long: `Delete the limit NAME (admin role). A limit that live leases hold a unit of is not deleted
(exit code 4): delete it once they end. Exit code 3 if there is no such limit.

Example:
  baton limits delete gpu-pool`,
		Args: exactArgs(1, "NAME"),
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitNotFound, exitConflict, exitAuth}})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		p := &store.DeleteLimitParams{Name: args[0], Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			err := st.DeleteLimit(ctx, p)
			if errors.Is(err, store.ErrNotFound) {
				return explain(err, "no limit %q", p.Name)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "deleted limit %s\n", printable(p.Name))
			return err
		})
	}
	return cmd
}
