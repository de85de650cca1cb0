package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/batonhq/baton/store"
)

// jobInfo is the INFO column: what the job waits for, who runs it, or why it ended.
func jobInfo(j *store.Job) string {
	lastErr := ""
	if n := len(j.Errors); n > 0 {
		e := j.Errors[n-1]
		lastErr = oneLine(e.Code+": "+e.Message, 72)
	}
	switch j.State {
	case store.JobScheduled:
		return "starts at " + formatTime(j.ScheduledAt)
	case store.JobAvailable:
		if j.Head {
			return "next"
		}
		return "queued behind the resource's head"
	case store.JobRunning:
		s := fmt.Sprintf("worker %s (token %d)", printable(j.Worker), j.Token)
		if j.CancelRequested {
			s += ", cancel requested"
		}
		return s
	case store.JobRetryable:
		s := "retry at " + formatTime(j.ScheduledAt)
		if lastErr != "" {
			s += " after " + lastErr
		}
		return s
	case store.JobCancelled:
		return cancelInfo(j)
	case store.JobSuperseded:
		if j.SupersededBy != 0 {
			return fmt.Sprintf("superseded by job %d, %s", j.SupersededBy, formatTime(j.FinishedAt))
		}
		return "finished " + formatTime(j.FinishedAt)
	default: // succeeded, discarded, skipped
		if lastErr != "" && j.State != store.JobSucceeded {
			return lastErr
		}
		return "finished " + formatTime(j.FinishedAt)
	}
}

// writeJobTable prints jobs as aligned columns.
func writeJobTable(w io.Writer, jobs []*store.Job) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tKIND\tRESOURCE\tSTATE\tATTEMPT\tCREATED\tINFO")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Kind, printable(j.Resource), j.State,
			j.Attempt, j.MaxAttempts, formatTime(j.CreatedAt), jobInfo(j))
	}
	return tw.Flush()
}

// writeJobDetail prints one job as "Field: value" lines and its error history.
func writeJobDetail(w io.Writer, j *store.Job) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", strconv.FormatInt(j.ID, 10))
	row("Kind", j.Kind)
	row("Resource", printable(j.Resource))
	state := string(j.State)
	if j.Head && !j.State.Final() {
		state += " (head of its resource)"
	}
	if j.CancelRequested {
		state += ", cancel requested"
	}
	row("State", state)
	if j.State == store.JobCancelled {
		row("Cancelled", cancelInfo(j))
	}
	row("Attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
	row("Priority", strconv.Itoa(j.Priority))
	// What the attempts hold beyond the resource, exclusive: shown when they do.
	if j.Shared {
		row("Mode", "shared")
	}
	if len(j.Resources) > 0 {
		row("Also holds", printableList(j.Resources))
	}
	if len(j.Limits) > 0 {
		row("Limits", printableList(j.Limits))
	}
	if j.IdempotencyKey != "" {
		row("Idempotency key", printable(j.IdempotencyKey))
	}
	args := string(j.Args)
	if args == "" {
		args = "{}"
	}
	row("Args", oneLine(args, 200))
	row("Created", formatTime(j.CreatedAt))
	row("Scheduled", formatTime(j.ScheduledAt))
	row("Attempted", formatTime(j.AttemptedAt))
	row("Finished", formatTime(j.FinishedAt))
	if j.Worker != "" {
		lease := fmt.Sprintf("%s, token %d", printable(j.Worker), j.Token)
		if j.State == store.JobRunning && !j.LeaseExpiresAt.IsZero() {
			lease += ", lease until " + formatTime(j.LeaseExpiresAt)
		}
		row("Worker", lease)
	}
	if j.Timeout > 0 {
		row("Timeout", j.Timeout.String())
	}
	if len(j.Errors) == 0 {
		row("Errors", "none")
		return tw.Flush()
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Errors (of attempts):")
	tw = newTable(w)
	fmt.Fprintln(tw, "  ATTEMPT\tAT\tCODE\tMESSAGE")
	for _, e := range j.Errors {
		// A message may span lines (a CMD's stderr): continuation lines are indented.
		lines := strings.Split(strings.TrimRight(e.Message, "\n"), "\n")
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", e.Attempt, formatTime(e.At), e.Code, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "  \t\t\t%s\n", l)
		}
	}
	return tw.Flush()
}

// printableList is names, each printable, separated by commas.
func printableList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = printable(n)
	}
	return strings.Join(out, ", ")
}
