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

// baton explain and baton jobs explain print the reasons the server names; bad input and unknown
// jobs get their exit codes.
func TestExplainCLI(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	f.cli(t, "kinds", "set", "deploy")
	first := f.submit(t, "--kind", "deploy", "--resource", "svc/x")
	js, err := f.store.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"deploy"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v %v", js, err)
	}
	second := f.submit(t, "--kind", "deploy", "--resource", "svc/x")

	r := f.cli(t, "jobs", "explain", fmt.Sprint(second.ID))
	if r.code != 0 || !strings.Contains(r.stdout, "held") || !strings.Contains(r.stdout, fmt.Sprintf("job:%d", first.ID)) {
		t.Fatalf("jobs explain %d: %s; want held by job:%d", second.ID, r, first.ID)
	}
	e := decodeJSON[wire.Explanation](t, f.cli(t, "jobs", "explain", fmt.Sprint(second.ID), "-o", "json"))
	if e.Job != second.ID || e.JobState != "available" || len(e.Reasons) == 0 || e.Reasons[0].Code != "held" || e.Reasons[0].Job != first.ID {
		t.Fatalf("jobs explain -o json: %+v", e)
	}
	if r := f.cli(t, "jobs", "explain", fmt.Sprint(first.ID)); r.code != 0 || !strings.Contains(r.stdout, "not waiting") {
		t.Fatalf("jobs explain of the running job: %s", r)
	}
	r = f.cli(t, "explain", "svc/x")
	if r.code != 0 || !strings.Contains(r.stdout, "held") || !strings.Contains(r.stdout, "ahead") {
		t.Fatalf("explain svc/x: %s; want held and ahead", r)
	}
	if r := f.cli(t, "explain", "svc/free"); r.code != 0 || !strings.Contains(r.stdout, "nothing holds it back") {
		t.Fatalf("explain of a free key: %s", r)
	}
	if r := f.cli(t, "jobs", "explain", "99999"); r.code != exitNotFound {
		t.Fatalf("jobs explain of no job: %s; want exit %d", r, exitNotFound)
	}
	if r := f.cli(t, "jobs", "explain", "abc"); r.code != exitUsage {
		t.Fatalf("jobs explain abc: %s; want exit %d", r, exitUsage)
	}
}
