package cli

import (
	"strings"
	"testing"
)

// Unknown commands and flags get the close names suggested, with exit code 2; the format of the
// unknown command's message is the one docs/cli.md shows.
func TestDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lokcs"}, `baton: unknown command "lokcs"; did you mean "locks"?`},
		{[]string{"job", "list"}, `did you mean "jobs"?`},
		{[]string{"locks", "lst"}, `baton locks: unknown command "lst"; did you mean "list"?`},
		{[]string{"fence", "chek"}, `did you mean "check"?`},
		{[]string{"jobs", "shwo", "1"}, `did you mean "show"?`},
		{[]string{"help", "lokcs"}, `baton: unknown command "lokcs"; did you mean "locks"?`},
		{[]string{"help", "locks", "lst"}, `baton locks: unknown command "lst"; did you mean "list"?`},
		{[]string{"locks", "list", "--prefx", "a"}, "baton locks list: unknown flag: --prefx; did you mean --prefix?"},
		{[]string{"locks", "list", "-prefx", "a"}, "unknown flag: --prefx; did you mean --prefix?"},
		{[]string{"jobs", "list", "--stat", "running"}, "did you mean --state?"},
		{[]string{"run", "--lokc", "k", "--", "true"}, "did you mean --lock?"},
		{[]string{"--servr", "http://x", "locks", "list"}, "did you mean --server?"},
		{[]string{"completion", "zhs"}, `unknown shell "zhs"; did you mean "zsh"?; want bash, zsh or fish`},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("baton %q: %s\nwant exit 2 and %q", c.args, r, c.want)
		}
	}
	// An unknown command is followed by the group's help, on stderr.
	if r := cli(t, "locks", "frob"); !strings.Contains(r.stderr, "\n\nUsage: baton locks COMMAND") {
		t.Errorf("baton locks frob: %s\nwant the group's help after the message", r)
	}
	if r := cli(t, "zzzz"); r.code != exitUsage || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("baton zzzz: %s\nwant no suggestion", r)
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"lokcs", "locks", 1}, {"kitten", "sitting", 3}, {"état", "etat", 1}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
