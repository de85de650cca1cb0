package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bashCompletionScript is where Debian's bash-completion package keeps its loader.
const bashCompletionScript = "/usr/share/bash-completion/bash_completion"

// tmuxShell is an interactive bash in a tmux session of its own (its own server socket).
type tmuxShell struct {
	t      *testing.T
	tmux   string
	socket string
}

func (s *tmuxShell) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.tmux, append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the terminal shows, trailing blank lines dropped.
func (s *tmuxShell) screen() string {
	return strings.TrimRight(s.run("capture-pane", "-p", "-J", "-t", "baton"), "\n ")
}

// waitScreen waits, at most half a minute, for the screen to satisfy cond, and returns it.
func (s *tmuxShell) waitScreen(what string, cond func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		scr := s.screen()
		if cond(scr) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("waited 30s for %s; the screen shows:\n%s", what, scr)
		}
		time.Sleep(20 * time.Millisecond) // the terminal has no event to wait on: poll what it shows
	}
}

// lastLine is the line the cursor is on: the screen's last.
func lastLine(screen string) string {
	lines := strings.Split(screen, "\n")
	return lines[len(lines)-1]
}

// Bash completion as a user gets it: a real interactive bash under tmux, with the script of
// `baton completion bash` sourced, completes by TAB what the user typed, with and without the
// bash-completion package. Bash splits words at the ':' and '=' of COMP_WORDBREAKS: after
// `--server http://127.0.0.1:7725` and `--server=x` the commands are completed, not file names;
// the values of -o, --state and --policy are completed. The shell's directory holds one file, so
// a file name completed where none belongs shows on the command line.
func TestBashCompletionInTmux(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is missing (scripts/test.sh installs it)")
		}
		t.Skip("no tmux")
	}
	modes := []string{"plain bash"}
	if _, err := os.Stat(bashCompletionScript); err == nil {
		modes = append(modes, "bash-completion")
	} else if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing (scripts/test.sh installs bash-completion)", bashCompletionScript)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := startTmuxBash(t, tmux, mode == "bash-completion")
			cases := []struct {
				typed string
				tabs  int
				want  func(screen string) bool
				what  string
			}{
				{"baton --server http://127.0.0.1:7725 lo", 1, lineIs("$ baton --server http://127.0.0.1:7725 locks "), "locks after --server URL"},
				{"baton --server=x lo", 1, lineIs("$ baton --server=x locks "), "locks after --server=x"},
				{"baton --server http://127.0.0.1:7725 ", 2, lists("locks", "worker"), "the commands after --server URL"},
				{"baton --server=x ", 2, lists("locks", "worker"), "the commands after --server=x"},
				{"baton -server http://127.0.0.1:7725 jobs li", 1, lineIs("$ baton -server http://127.0.0.1:7725 jobs list "), "list after -server URL"},
				{"baton jobs list --state ru", 1, lineIs("$ baton jobs list --state running "), "a --state value"},
				{"baton jobs list --state ", 2, lists("retryable", "discarded"), "the --state values"},
				{"baton jobs submit --policy rej", 1, lineIs("$ baton jobs submit --policy reject "), "a --policy value"},
				{"baton kinds set k --policy ", 2, lists("queue", "skip", "reject", "replace"), "the --policy values"},
				{"baton locks list -o j", 1, lineIs("$ baton locks list -o json "), "an -o value"},
				{"baton locks list -o ", 2, lists("table", "json"), "the -o values"},
				{"baton locks list --output=t", 1, lineIs("$ baton locks list --output=table "), "an --output= value"},
			}
			for _, c := range cases {
				s.run("send-keys", "-t", "baton", "-l", c.typed)
				for range c.tabs {
					s.run("send-keys", "-t", "baton", "Tab")
				}
				scr := s.waitScreen(c.what+" ("+c.typed+"<TAB>)", c.want)
				if strings.Contains(scr, "zz-a-file") {
					t.Errorf("%q<TAB>: a file name completed:\n%s", c.typed, scr)
				}
				s.clear()
			}
			// Where nothing completes (a URL), no file name is offered either: what is typed next
			// follows what was typed.
			for _, typed := range []string{"baton --server ", "baton --server=", "baton locks status "} {
				s.run("send-keys", "-t", "baton", "-l", typed)
				s.run("send-keys", "-t", "baton", "Tab", "Tab")
				s.run("send-keys", "-t", "baton", "-l", "X")
				s.waitScreen("no completion after "+typed, lineIs("$ "+typed+"X"))
				s.clear()
			}
		})
	}
}

// startTmuxBash starts an interactive bash in tmux with baton on its PATH and the completion
// script sourced (after the bash-completion package if withPackage), in a directory that holds
// one file, zz-a-file.
func startTmuxBash(t *testing.T, tmux string, withPackage bool) *tmuxShell {
	t.Helper()
	dir := t.TempDir()
	bin, work := filepath.Join(dir, "bin"), filepath.Join(dir, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(binary, filepath.Join(bin, "baton")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "zz-a-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := exec.Command(binary, "completion", "bash").Output()
	if err != nil {
		t.Fatalf("baton completion bash: %v", err)
	}
	scriptFile := filepath.Join(dir, "baton.bash")
	if err := os.WriteFile(scriptFile, script, 0o644); err != nil {
		t.Fatal(err)
	}
	rc := "PS1='$ '\n"
	if withPackage {
		rc += "source " + bashCompletionScript + "\n"
	}
	rc += "source " + scriptFile + "\n"
	rcFile := filepath.Join(dir, "bashrc")
	if err := os.WriteFile(rcFile, []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &tmuxShell{t: t, tmux: tmux, socket: filepath.Join(dir, "tmux.sock")}
	s.run("-f", "/dev/null", "new-session", "-d", "-s", "baton", "-x", "200", "-y", "50", "-c", work,
		"env", "-i", "PATH="+bin+":/usr/local/bin:/usr/bin:/bin", "HOME="+dir, "TERM=xterm", "INPUTRC=/dev/null",
		"bash", "--noprofile", "--rcfile", rcFile, "-i")
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", s.socket, "kill-server").Run() })
	s.waitScreen("the prompt", func(scr string) bool { return scr == "$" })
	return s
}

// clear empties the command line and the screen, and waits for the prompt alone.
func (s *tmuxShell) clear() {
	s.t.Helper()
	// Readline's own keys, not Ctrl-C: a test run in the background may have SIGINT ignored,
	// and bash keeps a signal ignored that it was started with.
	s.run("send-keys", "-t", "baton", "C-e", "C-u", "C-l")
	s.run("clear-history", "-t", "baton")
	s.waitScreen("a clear screen", func(scr string) bool { return scr == "$" })
}

// lineIs waits for the command line to read want.
func lineIs(want string) func(string) bool {
	return func(scr string) bool { return lastLine(scr) == strings.TrimRight(want, " ") }
}

// lists waits for a listing of candidates that holds each of words.
func lists(words ...string) func(string) bool {
	return func(scr string) bool {
		listing, _, _ := strings.Cut(scr, "\n$ ")
		for _, w := range words {
			if !strings.Contains(listing, w) {
				return false
			}
		}
		return strings.Count(scr, "$ ") >= 2 // bash prints the prompt and the line again below the listing
	}
}
