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
