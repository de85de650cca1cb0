package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// baton explain KEY and baton jobs explain ID: why a resource is not granted now, or a job does
// not run now.

const explainOutput = `Output: one line per reason that holds, each with its code, or "nothing holds it back". The
codes: held (by a lease or a job attempt: holder, token, until when), ahead (how many wait before
it in the resource's line, and the first of them), resting (until when, and why: cooldown,
lock-delay or resource-cooldown)`

func (a *app) explainCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "explain KEY [-o table|json]",
		Short: "say why a resource would not be granted now",
		Long: `Say why KEY would not be granted to a new lock request now: who holds it, how many wait before
a newcomer in its line, and whether it rests. Needs a server over SQLite or PostgreSQL (other
stores keep no line: exit code 1). For a job, see 'baton jobs explain ID'.

Example:
  baton explain cluster/eu-1

` + explainOutput + `.

With -o json, the explanation of the HTTP API: {"key", "reasons": [{"code", "message", "holder",
"job", "token", "until", "ahead", "rest"}]}.`,
		Args: exactArgs(1, "key"),
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := store.ValidateKey(args[0]); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		e, err := st.ExplainResource(ctx, args[0])
		if err != nil {
			return err
		}
		return a.writeExplanation(e)
	}
	return cmd
}

func (a *app) jobsExplainCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "explain ID [-o table|json]",
		Short: "say why a job does not run now",
		Long: `Say why a job does not run now, naming each reason that holds. Exit code 3 if there is no such
job. A running or finished job is not waiting: its state is printed, and no reasons.

Example:
  baton jobs explain 12

` + explainOutput + `; and for a job also guard (the resource's state fails the kind's guard: the
job will be discarded when claimed), scheduled or backing_off (until when), no_worker (no worker
of its kind asked for work in the last minute) and unknown_kind.

With -o json, the explanation of the HTTP API: {"key", "job", "job_state", "reasons": [...]}.`,
		Args: exactArgs(1, "job ID"),
	}, meta{exits: exitsLookup, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		id, err := parseJobID(args[0])
		if err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		e, err := st.ExplainJob(ctx, id)
		if err != nil {
			return notFound(err, fmt.Sprintf("job %d", id))
		}
		return a.writeExplanation(e)
	}
	return cmd
}

func (a *app) writeExplanation(e *baton.Explanation) error {
	if a.g.output == "json" {
		return writeJSON(a.stdout, wire.ExplanationFrom(e))
	}
	return writeExplanationText(a.stdout, e)
}

func writeExplanationText(w io.Writer, e *baton.Explanation) error {
	var b strings.Builder
	if e.Job != 0 {
		fmt.Fprintf(&b, "job %d on %s (%s)\n", e.Job, e.Key, e.JobState)
		switch e.JobState {
		case store.JobScheduled, store.JobAvailable, store.JobRetryable:
		default:
			b.WriteString("  not waiting\n")
			_, err := io.WriteString(w, b.String())
			return err
		}
	} else {
		fmt.Fprintf(&b, "%s\n", e.Key)
	}
	if len(e.Reasons) == 0 {
		b.WriteString("  nothing holds it back\n")
	}
	for _, r := range e.Reasons {
		fmt.Fprintf(&b, "  %-12s %s\n", r.Code, r.Message)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
