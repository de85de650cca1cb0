package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/wire"
)

// jobs list takes several values per filter (repeated or comma-separated) and lists the union,
// one page in ID order.
func TestJobsListSeveralValues(t *testing.T) {
	f := newJobsFixture(t)
	for _, k := range []string{"a", "b"} {
		if r := f.cli(t, "kinds", "set", k); r.code != 0 {
			t.Fatalf("kinds set: %s", r)
		}
	}
	j1 := f.submit(t, "--kind", "a", "--resource", "r1")
	j2 := f.submit(t, "--kind", "a", "--resource", "r1")
	j3 := f.submit(t, "--kind", "b", "--resource", "r,2")
	if r := f.cli(t, "jobs", "cancel", fmt.Sprint(j2.ID)); r.code != 0 {
		t.Fatalf("cancel: %s", r)
	}
	ids := func(args ...string) []int64 {
		t.Helper()
		jobs := decodeJSON[[]wire.Job](t, f.cli(t, append(append([]string{"jobs", "list"}, args...), "-o", "json")...))
		var out []int64
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	cases := []struct {
		args []string
		want []int64
	}{
		{[]string{"--state", "cancelled"}, []int64{j2.ID}},
		{[]string{"--state", "available", "--state", "cancelled"}, []int64{j1.ID, j2.ID, j3.ID}},
		{[]string{"--state", "available,cancelled", "--kind", "b"}, []int64{j3.ID}},
		{[]string{"--kind", "a", "--kind", "b", "--limit", "2"}, []int64{j1.ID, j2.ID}},
		{[]string{"--kind", "a,b", "--state", "available"}, []int64{j1.ID, j3.ID}},
		{[]string{"--resource", "r1", "--resource", "r,2", "--after", fmt.Sprint(j1.ID), "--limit", "2"}, []int64{j2.ID, j3.ID}},
		{[]string{"--resource", "r,2"}, []int64{j3.ID}},
	}
	for _, c := range cases {
		if got := ids(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("jobs list %q = %v, want %v", c.args, got, c.want)
		}
	}
	if r := f.cli(t, "dlq", "list", "--kind", "a,b", "--resource", "r1", "--resource", "x"); r.code != 0 || !strings.Contains(r.stdout, "no dead letters") {
		t.Errorf("dlq list with several values: %s", r)
	}
	if r := f.cli(t, "jobs", "list", "--state", "available,bogus"); r.code != exitUsage || !strings.Contains(r.stderr, `invalid --state`) || !strings.Contains(r.stderr, `"bogus"`) {
		t.Errorf("jobs list with one bad state: %s", r)
	}
}
