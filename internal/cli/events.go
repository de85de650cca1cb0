package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) eventsCommand() *cobra.Command {
	var key string
	var limit int
	var oldestFirst, follow bool
	var interval time.Duration
	cmd := a.command(&cobra.Command{
		Use:   "events [--key KEY] [--limit N] [--oldest-first] [--follow [--interval 1s]] [-o table|json]",
		Short: "the audit log (admin)",
		Long: `Print the audit log, newest first: every acquire, release, expiry takeover (a lock taken over
from a crashed holder) and force-release, with who did it and why; and every job claim
(job_claim), the first lease renewal of each attempt (job_renew) and the attempt's end
(job_complete, with its OUTCOME), where KEY is the job's resource and JOB is id#attempt; and
an admin's fence reset (fence_reset: KEY is the fence's resource, TOKEN the token it held).
ACTOR is who made the change: the token name the server authenticated (-o json: principal), or
on a server without --auth-file the holder, or the admin's --actor for a forced change. Needs
an admin token.
--limit N prints the newest N (one request; a server older than this one is read whole);
--oldest-first prints in the order they happened, and then --limit N is the oldest N.

--follow prints the newest --limit events (default 10) oldest first, then each new event as it
happens (asking the server every --interval), until interrupted (Ctrl-C; exit code 0). With
-o json it prints one JSON object per line.

Example:
  baton events --key terraform/prod

Output (table):
  ID  AT                    KIND           KEY             HOLDER       TOKEN  ACTOR        JOB  OUTCOME  REASON
  42  2026-11-21T14:40:02Z  force_release  terraform/prod  ci-runner-7  42     ops                         runner wedged
  41  2026-11-21T14:31:34Z  acquire        terraform/prod  ci-runner-7  42     ci-runner-7`,
		Args: noArgs,
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&key, "key", "", "only events of `KEY`")
	fs.IntVar(&limit, "limit", 0, "at most `N` events (1-1000): the newest, or with --oldest-first the oldest")
	fs.BoolVar(&oldestFirst, "oldest-first", false, "print in the order the events happened")
	fs.BoolVar(&follow, "follow", false, "then print new events as they happen, until interrupted")
	pollFlag(cmd, &interval)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		if err := checkInterval(interval); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		var all []*store.Event
		switch {
		case follow:
			all, err = newestEvents(ctx, st, key, cmp.Or(limit, followLimit))
		case oldestFirst && limit != 0:
			all, err = st.Events(ctx, &store.EventsParams{Key: key, Limit: limit})
		case oldestFirst:
			all, err = allEvents(ctx, st, key)
		default:
			all, err = newestEvents(ctx, st, key, limit)
			slices.Reverse(all)
		}
		if err != nil {
			return err
		}
		if follow {
			return a.followEvents(cmd, st, key, all, interval)
		}
		return writeEvents(a.stdout, a.g, all)
	}
	return cmd
}

// followLimit is how many past events --follow prints before the new ones, without --limit.
const followLimit = 10

// newestEvents returns the newest n events of the log (every event if n is 0), oldest first. It
// asks for them newest first (order=desc), one page; it reads the whole log only for n = 0 or
// when the answer came oldest first, from a server older than order=desc, which ignores it (so
// at least two are asked for: one event alone would not tell).
func newestEvents(ctx context.Context, st *client.Store, key string, n int) ([]*store.Event, error) {
	if n > 0 {
		page, err := st.Events(ctx, &store.EventsParams{Key: key, Limit: max(n, 2), NewestFirst: true})
		if err != nil {
			return nil, err
		}
		if len(page) < 2 || page[0].ID > page[1].ID {
			page = page[:min(n, len(page))]
			slices.Reverse(page)
			return page, nil
		}
	}
	all, err := allEvents(ctx, st, key)
	if err != nil {
		return nil, err
	}
	if n > 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return all, nil
}

// allEvents reads every page of the audit log, oldest first.
func allEvents(ctx context.Context, st *client.Store, key string) ([]*store.Event, error) {
	p := &store.EventsParams{Key: key, Limit: listPageSize}
	var all []*store.Event
	for {
		page, err := st.Events(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < p.Limit {
			return all, nil
		}
		p.After = page[len(page)-1].ID
	}
}

// followEvents prints all (the newest events, oldest first), then new ones as they come, until
// interrupted.
func (a *app) followEvents(cmd *cobra.Command, st *client.Store, key string, all []*store.Event, interval time.Duration) error {
	var after uint64
	header := a.g.output != "json"
	emit := func(evs []*store.Event) error {
		if len(evs) == 0 {
			return nil
		}
		after = evs[len(evs)-1].ID
		if a.g.output == "json" {
			for _, e := range evs {
				if err := writeJSONLine(a.stdout, wire.EventFrom(e)); err != nil {
					return err
				}
			}
			return nil
		}
		err := writeEventRows(a.stdout, evs, header)
		header = false
		return err
	}
	if err := emit(all); err != nil {
		return err
	}
	if header {
		fmt.Fprintln(a.stderr, cmd.CommandPath()+": following; Ctrl-C to stop")
	}
	ctx, stop := interruptContext()
	defer stop()
	return poll(ctx, interval, func(ctx context.Context) error {
		for {
			page, err := st.Events(ctx, &store.EventsParams{Key: key, After: after, Limit: listPageSize})
			if err != nil {
				return err
			}
			if err := emit(page); err != nil {
				return err
			}
			if len(page) < listPageSize {
				return nil
			}
		}
	})
}

func writeEvents(w io.Writer, g *globals, evs []*store.Event) error {
	if g.output == "json" {
		out := make([]wire.Event, 0, len(evs))
		for _, e := range evs {
			out = append(out, wire.EventFrom(e))
		}
		return writeJSON(w, out)
	}
	return writeEventRows(w, evs, true)
}

// eventActor is who made the change: the principal the server authenticated, or without one
// the event's actor (the holder, or the word of the admin who forced a change).
func eventActor(e *store.Event) string {
	if e.Principal != "" {
		return e.Principal
	}
	return e.Actor
}

// writeEventRows prints events as aligned columns, with the header line if header.
func writeEventRows(w io.Writer, evs []*store.Event, header bool) error {
	tw := newTable(w)
	if header {
		fmt.Fprintln(tw, "ID\tAT\tKIND\tKEY\tHOLDER\tTOKEN\tACTOR\tJOB\tOUTCOME\tREASON")
	}
	for _, e := range evs {
		job := ""
		if e.JobID != 0 {
			job = fmt.Sprintf("%d#%d", e.JobID, e.Attempt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Kind,
			printable(e.Key), printable(e.Holder), e.Token, printable(eventActor(e)), job, e.Outcome, blankOr(e.Reason))
	}
	return tw.Flush()
}
