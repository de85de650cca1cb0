package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// RunJobAuditReplace checks, on a fresh store opened with the audit log on, the events of latest
// wins (store.PolicyReplace): a queued job a replace supersedes is a job_superseded event whose
// reason names its replacement; a running one it asked to stop ends as a job_complete with
// outcome superseded.
func RunJobAuditReplace(t *testing.T, s AuditedJobStore) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "audit.rep", Policy: store.PolicyReplace}}); err != nil {
		t.Fatal(err)
	}
	const res = "audit/replace"
	submit := func() *store.Job {
		t.Helper()
		r, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "audit.rep", Resource: res})
		if err != nil {
			t.Fatal(err)
		}
		return r.Job
	}
	a := submit()
	js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"audit.rep"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(js) != 1 || js[0].ID != a.ID {
		t.Fatalf("ClaimJobs = %v, %v; want job %d", js, err, a.ID)
	}
	run := js[0]
	b := submit() // asks a to stop
	c := submit() // supersedes b
	done, err := s.FailJob(ctx, &store.FailParams{ID: run.ID, Token: run.Token, Code: store.CodeCancelled, Message: "replaced"})
	if err != nil || done.State != store.JobSuperseded {
		t.Fatalf("FailJob of the replaced attempt = %v, %v; want superseded", done, err)
	}
	events, err := s.Events(ctx, &store.EventsParams{Key: res})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s job=%d token=%d holder=%q outcome=%q reason=%q", e.Kind, e.JobID, e.Token,
			e.Holder, e.Outcome, e.Reason))
	}
	want := []string{
		fmt.Sprintf("%s job=%d token=%d holder=%q outcome=%q reason=%q", store.EventJobClaim, a.ID, run.Token, "w", "", ""),
		fmt.Sprintf("%s job=%d token=%d holder=%q outcome=%q reason=%q", store.EventJobSuperseded, b.ID, 0, "", "superseded",
			store.SupersededReason(c.ID)),
		fmt.Sprintf("%s job=%d token=%d holder=%q outcome=%q reason=%q", store.EventJobComplete, a.ID, run.Token, "w",
			"superseded", store.CodeCancelled),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log of %q:\n got %q\nwant %q", res, got, want)
	}
}
