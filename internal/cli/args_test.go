package cli

import (
	"strings"
	"testing"
)

// Flags may be written --name value, --name=value or -name value (docs/cli.md), before or after
// a locks command's key; a value that starts with a dash is the flag's; nothing after CMD's
// first word is baton's.
func TestFlagSpellings(t *testing.T) {
	f := newFixture(t, nil)
	for _, args := range [][]string{
		{"locks", "acquire", "k1", "-holder", "h1", "-ttl", "1m", "-o", "json"},
		{"locks", "acquire", "-holder=h1", "k1", "-ttl=1m", "--o", "json"},
		{"-o", "json", "locks", "acquire", "--holder", "h1", "k1"},
		{"-output=json", "locks", "acquire", "k1", "--holder=h1"},
	} {
		if r := f.cli(t, args...); r.code != 0 || !strings.Contains(r.stdout, `"holder": "h1"`) {
			t.Errorf("baton %q: %s\nwant the lease of h1, as JSON", args, r)
		}
	}
	if r := f.cli(t, "-server", f.url, "locks", "list", "-prefix", "k"); r.code != 0 || !strings.Contains(r.stdout, "k1") {
		t.Errorf("-server URL locks list -prefix k: %s", r)
	}
	// A value that starts with a dash is the value, not a flag.
	if r := f.cli(t, "locks", "list", "-limit", "-1"); r.code != exitUsage || !strings.Contains(r.stderr, "--limit must be between 1 and 1000") {
		t.Errorf("locks list -limit -1: %s", r)
	}
	if r := f.cli(t, "locks", "acquire", "k2", "--wait", "-1s"); r.code != exitUsage || !strings.Contains(r.stderr, "--wait must not be negative") {
		t.Errorf("locks acquire k2 --wait -1s: %s", r)
	}
	// CMD's arguments are CMD's, with or without --.
	for _, args := range [][]string{
		{"run", "-lock", "k3", "--", "echo", "-server", "--ttl", "-o"},
		{"run", "-lock", "k3", "echo", "-server", "--ttl", "-o"},
	} {
		if r := f.cli(t, args...); r.code != 0 || r.stdout != "-server --ttl -o\n" {
			t.Errorf("baton %q: %s\nwant CMD's arguments untouched", args, r)
		}
	}
	if r := f.cli(t, "-version"); r.code != 0 || !strings.HasPrefix(r.stdout, "baton ") {
		t.Errorf("baton -version: %s", r)
	}
}

// A flag that takes one value refuses a second, however it is spelled; repeatable flags and
// switches do not.
func TestRepeatedFlagSpellings(t *testing.T) {
	f := newJobsFixture(t)
	for _, args := range [][]string{
		{"locks", "list", "-prefix", "a", "--prefix=b"},
		{"jobs", "list", "-limit", "1", "-limit=2"},
		{"locks", "list", "-o", "json", "--output", "table"},
		{"serve", "--listen", "127.0.0.1:0", "-listen", "127.0.0.1:0"},
	} {
		r := f.cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "is given twice; it takes one value") {
			t.Errorf("baton %q: %s\nwant exit 2 naming the repeated flag", args, r)
		}
	}
	for _, args := range [][]string{
		{"jobs", "list", "-state", "available", "--state=running", "-kind", "a", "--kind", "b"},
		{"dlq", "purge", "--yes", "--yes", "--kind", "nothing-here"},
	} {
		if r := f.cli(t, args...); r.code != 0 {
			t.Errorf("baton %q: %s\nwant repeats accepted", args, r)
		}
	}
}
