package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bash script completes commands, subcommands and flags from the CLI's own help texts.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	r := cli(t, "completion", "bash")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("completion bash: %s", r)
	}
	script := filepath.Join(t.TempDir(), "baton.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ line, want string }{
		{"baton lo", "locks"},
		{"baton locks li", "list"},
		{"baton locks list --pr", "--prefix"},
		{"baton --server http://x:1 jobs l", "list"},
		{"baton jobs list --state running --ki", "--kind"},
		{"baton kinds set k --max", "--max-attempts"},
		{"baton serve --li", "--listen"},
		{"baton worker --lease", "--lease-ttl"},
		{"baton completion f", "fish"},
		{"baton help jo", "jobs"},
		{"baton dlq p", "purge"},
		{"baton token n", "new"},
		{"baton token new --ro", "--role"},
	}
	for _, c := range cases {
		words := strings.Fields(c.line)
		out, err := exec.Command(bash, append([]string{"-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _baton; echo "${COMPREPLY[*]}"`, "bash", script}, words...)...).Output()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("complete %q = %q, %v; want %q", c.line, out, err, c.want)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"zsh", "fish"} {
		r := cli(t, "completion", sh)
		if r.code != 0 || !strings.Contains(r.stdout, "locks") || !strings.Contains(r.stdout, "force-release") {
			t.Errorf("completion %s: %s", sh, r)
		}
		if path, err := exec.LookPath(sh); err == nil {
			if out, err := exec.Command(path, "-n", "-c", r.stdout).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
		}
	}
	r := cli(t, "completion", "fish")
	for _, want := range []string{
		"complete -c baton -n '__fish_seen_subcommand_from locks; and __fish_seen_subcommand_from list' -l prefix -r",
		"complete -c baton -n '__fish_seen_subcommand_from run' -l no-wait\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completion fish lacks %q", want)
		}
	}
	if r := cli(t, "completion", "tcsh"); r.code != exitUsage || !strings.Contains(r.stderr, "bash, zsh or fish") {
		t.Errorf("completion tcsh: %s", r)
	}
	if r := cli(t, "completion", "zhs"); r.code != exitUsage || !strings.Contains(r.stderr, `did you mean "zsh"?`) {
		t.Errorf("completion zhs: %s", r)
	}
}

// Unknown commands and flags get the close names suggested.
func TestDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lokcs"}, `unknown command "lokcs"; did you mean "locks"?`},
		{[]string{"job", "list"}, `did you mean "jobs"?`},
		{[]string{"locks", "lst"}, `did you mean "list"?`},
		{[]string{"fence", "chek"}, `did you mean "check"?`},
		{[]string{"jobs", "shwo", "1"}, `did you mean "show"?`},
		{[]string{"locks", "list", "--prefx", "a"}, "flag provided but not defined: -prefx; did you mean --prefix?"},
		{[]string{"jobs", "list", "--stat", "running"}, "did you mean --state?"},
		{[]string{"run", "--lokc", "k", "--", "true"}, "did you mean --lock?"},
		{[]string{"--servr", "http://x", "locks", "list"}, "did you mean --server?"},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("baton %q: %s\nwant exit 2 and %q", c.args, r, c.want)
		}
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
