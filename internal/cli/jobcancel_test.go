package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// A job cancelled between attempts shows the cancel apart from the earlier attempt's error,
// which is not its reason: in jobs show, jobs list and the JSON (cancel, last_error).
func TestCancelledJobShowsTheCancelApartFromErrors(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "deploy"); r.code != 0 {
		t.Fatalf("kinds set: %s", r)
	}
	ctx := context.Background()
	failed := f.submit(t, "--kind", "deploy", "--resource", "svc/a")
	jobs, err := f.store.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"deploy"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := f.store.FailJob(ctx, &store.FailParams{ID: jobs[0].ID, Token: jobs[0].Token, Message: "connection refused", RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	never := f.submit(t, "--kind", "deploy", "--resource", "svc/b")
	for _, id := range []int64{failed.ID, never.ID} {
		if r := f.cli(t, "jobs", "cancel", fmt.Sprint(id)); r.code != 0 {
			t.Fatalf("cancel %d: %s", id, r)
		}
	}

	r := f.cli(t, "jobs", "show", fmt.Sprint(failed.ID))
	if r.code != 0 || !strings.Contains(r.stdout, "Cancelled:") || !strings.Contains(r.stdout, "between attempts (after 1); attempt 1 had failed: handler_error: connection refused") ||
		!strings.Contains(r.stdout, "Errors (of attempts):") {
		t.Errorf("jobs show of a job cancelled after a failed attempt: %s", r)
	}
	j := decodeJSON[wire.Job](t, f.cli(t, "jobs", "show", fmt.Sprint(failed.ID), "-o", "json"))
	if j.Cancel == nil || j.Cancel.DuringAttempt != 0 || j.Cancel.At.IsZero() || j.LastError == nil || j.LastError.Attempt != 1 || j.LastError.Code != store.CodeHandlerError {
		t.Errorf("JSON of a job cancelled after a failed attempt: cancel %+v, last_error %+v", j.Cancel, j.LastError)
	}
	j = decodeJSON[wire.Job](t, f.cli(t, "jobs", "show", fmt.Sprint(never.ID), "-o", "json"))
	if j.Cancel == nil || j.LastError != nil {
		t.Errorf("JSON of a job cancelled before any attempt: cancel %+v, last_error %+v", j.Cancel, j.LastError)
	}
	r = f.cli(t, "jobs", "list", "--state", "cancelled")
	lines := strings.Split(r.stdout, "\n")
	if r.code != 0 || len(lines) < 3 || !strings.Contains(lines[1], "cancelled 20") || !strings.Contains(lines[1], "attempt 1 had failed") ||
		!strings.Contains(lines[2], "before any attempt") {
		t.Errorf("jobs list of cancelled jobs: %s", r)
	}
	// A running job cancelled: its attempt's end honours the request, whatever it reports.
	running := f.submit(t, "--kind", "deploy", "--resource", "svc/d")
	jobs, err = f.store.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"deploy"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != running.ID {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if r := f.cli(t, "jobs", "cancel", fmt.Sprint(running.ID)); r.code != 0 || !strings.Contains(r.stdout, "cancel requested") {
		t.Fatalf("cancel of a running job: %s", r)
	}
	if _, err := f.store.FailJob(ctx, &store.FailParams{ID: jobs[0].ID, Token: jobs[0].Token, Message: "killed"}); err != nil {
		t.Fatal(err)
	}
	if r := f.cli(t, "jobs", "show", fmt.Sprint(running.ID)); r.code != 0 || !strings.Contains(r.stdout, "while attempt 1 ran") {
		t.Errorf("jobs show of a job cancelled while running: %s", r)
	}
	if j := decodeJSON[wire.Job](t, f.cli(t, "jobs", "show", fmt.Sprint(running.ID), "-o", "json")); j.Cancel == nil || j.Cancel.DuringAttempt != 1 {
		t.Errorf("JSON of a job cancelled while running: cancel %+v", j.Cancel)
	}
	// Other states carry no cancel.
	ok := f.submit(t, "--kind", "deploy", "--resource", "svc/c")
	if j := decodeJSON[wire.Job](t, f.cli(t, "jobs", "show", fmt.Sprint(ok.ID), "-o", "json")); j.Cancel != nil || j.LastError != nil {
		t.Errorf("JSON of an available job: cancel %+v, last_error %+v", j.Cancel, j.LastError)
	}
}
