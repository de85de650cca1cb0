package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// A resource's line (store.LineReader), as 'resources show' and 'locks waiters' print it.

// defaultLineLimit is how many tickets of a line are printed without --limit.
const defaultLineLimit = 100

const lineOutputHelp = `  POS  TYPE  WHO          SINCE                 EXPIRES               NOT_BEFORE            FIRST
  1    lock  bg           2026-11-21T14:31:02Z  2026-11-21T14:32:02Z  -                     break-glass: incident 7
  2    lock  ci-runner-8  2026-11-21T14:31:05Z  2026-11-21T14:32:05Z  -                     -
  3    job   12 (deploy)  2026-11-21T14:31:09Z  -                     -                     -
  4    job   13 (deploy)  2026-11-21T14:31:10Z  -                     2026-11-21T15:31:10Z  -`

func (a *app) locksWaitersCommand() *cobra.Command {
	var limit int
	cmd := a.command(&cobra.Command{
		Use:   "waiters KEY [--limit N] [-o table|json]",
		Short: "show who waits for a key, in line order",
		Long: `Show KEY's line: the waiting lock requests and the unfinished jobs that are not running, in the
order they will be granted (the front first). A lock request keeps its place while its waiter
keeps waiting (an abandoned one expires and is skipped); a job that is not ready yet (NOT_BEFORE:
scheduled, or backing off) lets those behind it go first; a break-glass request is before
every other. Needs a server whose store keeps one line per key (SQLite, PostgreSQL).

Example:
  baton locks waiters terraform/prod

Output (table):
` + lineOutputHelp + `
or
  nobody waits for terraform/prod

With -o json, a JSON array of ticket objects (docs/http-api.md), [] if nobody waits.`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().IntVar(&limit, "limit", 0, "at most `N` waiters from the front (1-1000, default 100)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		key := args[0]
		if err := checkLimit(limit); err != nil {
			return err
		}
		if limit == 0 {
			limit = defaultLineLimit
		}
		if err := store.ValidateKey(key); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		l, err := st.ResourceLine(ctx, key, limit)
		if errors.Is(err, client.ErrNoLine) {
			return explain(err, "the server's store keeps no line of waiters (SQLite and PostgreSQL do)")
		}
		if err != nil {
			return err
		}
		if a.g.output == "json" {
			var out wire.Resource
			out.LineFrom(l, time.Now())
			return writeJSON(a.stdout, out.Line)
		}
		if len(l.Tickets) == 0 {
			_, err := fmt.Fprintf(a.stdout, "nobody waits for %s\n", printable(key))
			return err
		}
		return writeTickets(a.stdout, l.Tickets)
	}
	return cmd
}

// writeTickets prints a line as a table.
func writeTickets(w io.Writer, ts []*store.Ticket) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "POS\tTYPE\tWHO\tSINCE\tEXPIRES\tNOT_BEFORE\tFIRST")
	for _, t := range ts {
		typ, who := wire.TicketLock, printable(t.Holder)
		if t.Job != 0 {
			typ, who = wire.TicketJob, strconv.FormatInt(t.Job, 10)+" ("+printable(t.JobKind)+")"
		}
		first := "-"
		if t.First {
			first = "break-glass"
			if t.FirstReason != "" {
				first += ": " + oneLine(t.FirstReason, 60)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Position, typ, who, formatTime(t.Since),
			formatTime(t.ExpiresAt), formatTime(t.NotBefore), first)
	}
	return tw.Flush()
}

// writeResourceLine prints, after a resource's table, its holder, rest and line.
func writeResourceLine(w io.Writer, key string, l *store.ResourceLine) error {
	fmt.Fprintln(w)
	switch h := l.Holder; {
	case h == nil:
		fmt.Fprintln(w, "held by nobody")
	case l.HolderJob != 0:
		fmt.Fprintf(w, "held by job %d (token %d, lease expires %s, %s left)\n", l.HolderJob, h.Token,
			formatTime(h.ExpiresAt), roundDuration(max(h.TTLLeft, 0)))
	default:
		owner := ""
		if h.Owner != "" {
			owner = "owner " + printable(h.Owner) + ", "
		}
		fmt.Fprintf(w, "held by %s (%stoken %d, expires %s, %s left)\n", printable(h.Holder), owner, h.Token,
			formatTime(h.ExpiresAt), roundDuration(max(h.TTLLeft, 0)))
	}
	if r := l.Rest; r != nil {
		fmt.Fprintf(w, "resting until %s (%s, %s left)\n", formatTime(time.Now().Add(r.Remaining)), r.Reason,
			roundDuration(r.Remaining))
	}
	if len(l.Tickets) == 0 {
		_, err := fmt.Fprintf(w, "nobody waits for %s\n", printable(key))
		return err
	}
	fmt.Fprintf(w, "line (%d waiting, the front first):\n", len(l.Tickets))
	return writeTickets(w, l.Tickets)
}
