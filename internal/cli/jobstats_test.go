package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func TestJobsStats(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "jobs", "stats"); r.code != 0 || !strings.Contains(r.stdout, "no unfinished jobs") {
		t.Fatalf("jobs stats with no jobs: %s", r)
	}
	for _, k := range []string{"build", "deploy"} {
		if r := f.cli(t, "kinds", "set", k); r.code != 0 {
			t.Fatalf("kinds set: %s", r)
		}
	}
	f.submit(t, "--kind", "build", "--resource", "a")
	f.submit(t, "--kind", "build", "--resource", "a")
	f.submit(t, "--kind", "build", "--resource", "b")
	f.submit(t, "--kind", "deploy", "--resource", "c", "--in", "1h")
	if _, err := f.store.ClaimJobs(context.Background(), &store.ClaimParams{Worker: "w", Kinds: []string{"build"}, Limit: 1, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r := f.cli(t, "jobs", "stats")
	want := [][]string{
		{"KIND", "SCHEDULED", "AVAILABLE", "RUNNING", "RETRYABLE", "TOTAL"},
		{"build", "0", "2", "1", "0", "3"},
		{"deploy", "1", "0", "0", "0", "1"},
		{"TOTAL", "1", "2", "1", "0", "4"},
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != len(want) {
		t.Fatalf("jobs stats: %s", r)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("jobs stats line %d = %q, want %q", i, got, w)
		}
	}
	resp := decodeJSON[wire.JobCountsResponse](t, f.cli(t, "jobs", "stats", "--kind", "deploy", "-o", "json"))
	if len(resp.Counts) != 1 || resp.Counts[0].Kind != "deploy" || resp.Counts[0].State != store.JobScheduled || resp.Counts[0].Count != 1 {
		t.Errorf("jobs stats --kind deploy -o json = %+v", resp)
	}
}
