package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// complete asks the CLI what completes the last of words, as the completion scripts do
// (baton __complete WORDS), and returns the candidates (without their descriptions) and the
// directive.
func complete(t *testing.T, words ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	r := cli(t, append([]string{cobra.ShellCompRequestCmd}, words...)...)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	d, err := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if r.code != 0 || !strings.HasPrefix(last, ":") || err != nil {
		t.Fatalf("__complete %q: %s", words, r)
	}
	var out []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		out = append(out, name)
	}
	return out, cobra.ShellCompDirective(d)
}

// Completion comes from the command tree: commands, flags, and the values of the flags that
// take one of a few; never file names where a file makes no sense (a URL, a key), and file
// names where it does.
func TestCompleteFromTheCommandTree(t *testing.T) {
	t.Setenv("BATON_SERVER", "")
	none, files := cobra.ShellCompDirectiveNoFileComp, cobra.ShellCompDirectiveDefault
	states := []string{"scheduled", "available", "running", "retryable", "succeeded", "cancelled", "discarded", "skipped", "superseded"}
	cases := []struct {
		words     []string
		want      []string
		directive cobra.ShellCompDirective
	}{
		{[]string{"lo"}, []string{"locks"}, none},
		{[]string{"--server", "http://127.0.0.1:7725", "lo"}, []string{"locks"}, none},
		{[]string{"--server=x", "lo"}, []string{"locks"}, none},
		{[]string{"-server", "http://127.0.0.1:7725", "lo"}, []string{"locks"}, none},
		{[]string{"--server", ""}, nil, none},
		{[]string{"locks", "status", ""}, nil, none},
		{[]string{"locks", "li"}, []string{"list"}, none},
		{[]string{"locks", "list", "-o", ""}, []string{"table", "json"}, none},
		{[]string{"locks", "list", "--output", "j"}, []string{"json"}, none},
		{[]string{"-o", "t"}, []string{"table"}, none},
		{[]string{"jobs", "list", "--state", ""}, states, none},
		{[]string{"jobs", "list", "--state", "ru"}, []string{"running"}, none},
		{[]string{"jobs", "list", "--state", "available,re"}, []string{"available,retryable"}, none},
		{[]string{"jobs", "list", "--state", "running", "--st"}, []string{"--state"}, none}, // repeatable
		{[]string{"jobs", "submit", "--policy", ""}, []string{"queue", "skip", "reject", "replace"}, none},
		{[]string{"kinds", "set", "k", "--policy", "s"}, []string{"skip"}, none},
		{[]string{"token", "new", "--role", ""}, []string{"read", "write", "admin"}, none},
		{[]string{"serve", "--log-format", ""}, []string{"text", "json"}, none},
		{[]string{"serve", "--li"}, []string{"--listen"}, none},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, none},
		{[]string{"help", "jo"}, []string{"jobs"}, none},
		{[]string{"help", "locks", "force"}, []string{"force-release"}, none},
		{[]string{"jobs", "submit", "--file", ""}, nil, files},
		{[]string{"serve", "--auth-file", ""}, nil, files},
		{[]string{"run", "--lock", "k", "--", ""}, nil, files},
		{[]string{"worker", "--kind", "k", "--", "./"}, nil, files},
	}
	for _, c := range cases {
		got, d := complete(t, c.words...)
		if !slices.Equal(got, c.want) || d != c.directive {
			t.Errorf("complete %q = %q, directive %d; want %q, %d", c.words, got, d, c.want, c.directive)
		}
	}
}

// The bash script, run by a real bash, completes words that bash split at the characters of
// COMP_WORDBREAKS (':' and '=') as the user typed them, without the bash-completion package:
// COMP_WORDS below are what bash makes of each line. The script calls `baton __complete`:
// here the test binary (TestMain).
func TestBashScriptJoinsWordsSplitAtWordbreaks(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "baton")); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "completion", "bash")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("completion bash: %s", r)
	}
	script := filepath.Join(dir, "baton.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line  string
		words []string // COMP_WORDS, as bash splits line
		want  []string
	}{
		{"baton --server http://127.0.0.1:7725 lo", []string{"baton", "--server", "http", ":", "//127.0.0.1", ":", "7725", "lo"}, []string{"locks"}},
		{"baton --server=x lo", []string{"baton", "--server", "=", "x", "lo"}, []string{"locks"}},
		{"baton --server=http://h:1 jobs li", []string{"baton", "--server", "=", "http", ":", "//h", ":", "1", "jobs", "li"}, []string{"list"}},
		{"baton jobs list --state ru", []string{"baton", "jobs", "list", "--state", "ru"}, []string{"running"}},
		{"baton jobs list --state=ret", []string{"baton", "jobs", "list", "--state", "=", "ret"}, []string{"retryable"}},
		// Cobra's script quotes a single candidate with printf %q, which escapes the comma: the
		// shell reads available\,retryable as available,retryable.
		{"baton jobs list --state available,ret", []string{"baton", "jobs", "list", "--state", "available,ret"}, []string{`available\,retryable`}},
		{"baton jobs submit --policy rej", []string{"baton", "jobs", "submit", "--policy", "rej"}, []string{"reject"}},
		{"baton locks list -o j", []string{"baton", "locks", "list", "-o", "j"}, []string{"json"}},
		{"baton completion f", []string{"baton", "completion", "f"}, []string{"fish"}},
	}
	for _, c := range cases {
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", `source "$1"; COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; shift 2
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_TYPE=9
__start_baton 2>/dev/null; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script, c.line)
		cmd.Args = append(cmd.Args, c.words...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "BATON_CLI_TEST_AS_BATON=1", "BATON_SERVER=")
		out, err := cmd.Output()
		if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("complete %q (COMP_WORDS %q) = %q, %v; want %q", c.line, c.words, got, err, c.want)
		}
	}
}

// The zsh and fish scripts are cobra's, for this binary; each shell, where installed, parses its
// own.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"zsh", "fish"} {
		r := cli(t, "completion", sh)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "baton __complete") && !strings.Contains(r.stdout, "__complete") {
			t.Errorf("completion %s: %s", sh, r)
		}
		if path, err := exec.LookPath(sh); err == nil {
			if out, err := exec.Command(path, "-n", "-c", r.stdout).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if r := cli(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, "bash, zsh or fish") {
			t.Errorf("baton %q: %s", args, r)
		}
	}
}
