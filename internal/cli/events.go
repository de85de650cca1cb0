package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func eventsCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton events", `Usage: baton events [--key KEY] [--limit N] [-o table|json]

Print the audit log, oldest first: every acquire, release, expiry takeover (a lock taken over
from a crashed holder) and force-release, with who did it and why; and every job claim
(job_claim), the first lease renewal of each attempt (job_renew) and the attempt's end
(job_complete, with its OUTCOME), where KEY is the job's resource and JOB is id#attempt.
Needs an admin token.
Without --limit, every page is fetched.

Example:
  baton events --key terraform/prod

Output (table):
  ID  AT                    KIND           KEY             HOLDER       TOKEN  ACTOR        JOB  OUTCOME  REASON
  41  2026-11-21T14:31:34Z  acquire        terraform/prod  ci-runner-7  42     ci-runner-7
  42  2026-11-21T14:40:02Z  force_release  terraform/prod  ci-runner-7  42     ops                         runner wedged

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	key := c.fs.String("key", "", "only events of `KEY`")
	limit := c.fs.Int("limit", 0, "at most `N` events (1-1000), one page")
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	if *limit < 0 || *limit > store.MaxListLimit {
		return c.usageError("--limit must be between 1 and %d", store.MaxListLimit)
	}
	st, err := g.store()
	if err != nil {
		return c.usageError("%v", err)
	}
	defer st.Close()
	ctx, cancel := callContext(0)
	defer cancel()
	p := &store.EventsParams{Key: *key, Limit: *limit}
	if *limit == 0 {
		p.Limit = listPageSize
	}
	var all []*store.Event
	for {
		page, err := st.Events(ctx, p)
		if err != nil {
			return c.fail(g, err)
		}
		all = append(all, page...)
		if *limit != 0 || len(page) < p.Limit {
			break
		}
		p.After = page[len(page)-1].ID
	}
	if err := writeEvents(stdout, g, all); err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func writeEvents(w io.Writer, g *globals, evs []*store.Event) error {
	if g.output == "json" {
		out := make([]wire.Event, 0, len(evs))
		for _, e := range evs {
			out = append(out, wire.EventFrom(e))
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tKIND\tKEY\tHOLDER\tTOKEN\tACTOR\tJOB\tOUTCOME\tREASON")
	for _, e := range evs {
		job := ""
		if e.JobID != 0 {
			job = fmt.Sprintf("%d#%d", e.JobID, e.Attempt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Kind,
			printable(e.Key), printable(e.Holder), e.Token, printable(e.Actor), job, e.Outcome, blankOr(e.Reason))
	}
	return tw.Flush()
}

// blankOr prints an optional text: nothing when it is empty.
func blankOr(s string) string {
	if s == "" {
		return ""
	}
	return printable(s)
}
