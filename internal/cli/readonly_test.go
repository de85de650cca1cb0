package cli

import (
	"strings"
	"testing"
)

// Only commands that write say "(nothing written)" when they refuse bad input.
func TestNothingWrittenOnlyOnWrites(t *testing.T) {
	f := newJobsFixture(t)
	reads := [][]string{
		{"jobs", "list", "--state", "bogus"},
		{"jobs", "list", "--kind", "bad\x01kind"},
		{"dlq", "list", "--resource", "bad\x01res"},
	}
	for _, args := range reads {
		r := f.cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "invalid") || strings.Contains(r.stderr, "nothing written") {
			t.Errorf("baton %q: %s\nwant exit 2, an invalid-input message without (nothing written)", args, r)
		}
	}
	writes := [][]string{
		{"jobs", "submit", "--kind", "k", "--resource", "r", "--args", "[1]"},
		{"kinds", "set", "k", "--policy", "bogus"},
	}
	for _, args := range writes {
		r := f.cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "(nothing written)") {
			t.Errorf("baton %q: %s\nwant exit 2 and (nothing written)", args, r)
		}
	}
}

// Zero values that used to be read as "the default" are refused with the flag and its rule.
func TestZeroFlagsRefused(t *testing.T) {
	f := newJobsFixture(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"kinds", "set", "k", "--max-attempts", "0"}, "--max-attempts must be between 1 and 1000 (got 0"},
		{[]string{"kinds", "set", "k", "--max-attempts", "-2"}, "--max-attempts must be between 1 and 1000 (got -2"},
		{[]string{"worker", "--kind", "k", "--lease-ttl", "0s", "--", "true"}, "--lease-ttl must be between 1s and 24h0m0s (got 0s)"},
		{[]string{"worker", "--kind", "k", "--lease-ttl", "25h", "--", "true"}, "--lease-ttl must be between 1s and 24h0m0s"},
	}
	for _, c := range cases {
		r := f.cli(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("baton %q: %s\nwant exit 2 and %q", c.args, r, c.want)
		}
	}
	// Nothing was written: the kind does not exist.
	if r := f.cli(t, "kinds", "list", "-o", "json"); r.code != 0 || strings.Contains(r.stdout, `"k"`) {
		t.Errorf("kinds list after refused sets: %s", r)
	}
	// A kind set without --max-attempts keeps its value.
	if r := f.cli(t, "kinds", "set", "k", "--max-attempts", "3"); r.code != 0 {
		t.Fatalf("kinds set: %s", r)
	}
	if r := f.cli(t, "kinds", "set", "k", "--policy", "skip", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"max_attempts": 3`) {
		t.Errorf("kinds set --policy: %s\nwant max_attempts kept at 3", r)
	}
}

// A flag that takes one value refuses a second instead of keeping only the last; flags that
// take several, and switches, accept repeats.
func TestRepeatedSingleValueFlag(t *testing.T) {
	f := newJobsFixture(t)
	for _, args := range [][]string{
		{"locks", "list", "--prefix", "a", "--prefix", "b"},
		{"events", "--key", "a", "--key=b"},
		{"locks", "acquire", "k", "--ttl", "1m", "--ttl", "2m"},
		{"--token", "a", "--token", "b", "locks", "list"},
	} {
		r := f.cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "is given twice; it takes one value") {
			t.Errorf("baton %q: %s\nwant exit 2 naming the repeated flag", args, r)
		}
	}
	if r := f.cli(t, "jobs", "list", "--state", "available", "--state", "running", "--kind", "x", "--kind", "y"); r.code != 0 {
		t.Errorf("repeatable filters: %s", r)
	}
}
