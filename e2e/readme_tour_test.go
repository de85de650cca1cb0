package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// tourStep is one "$ command" of a console block of README.md and the output shown under it.
type tourStep struct {
	line int // in README.md
	cmd  string
	want string
}

// readmeTour reads the console blocks of README.md.
func readmeTour(t *testing.T) []tourStep {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []tourStep
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "```console":
			in = true
		case in && line == "```":
			in = false
		case in && strings.HasPrefix(line, "$ "):
			steps = append(steps, tourStep{line: n, cmd: strings.TrimPrefix(line, "$ ")})
		case in && len(steps) > 0:
			steps[len(steps)-1].want += line + "\n"
		}
	}
	if len(steps) < 10 {
		t.Fatalf("README.md has %d console commands; the tour has more", len(steps))
	}
	return steps
}

// What varies from run to run: times, durations, holder names, lease IDs, and the column
// widths that follow from them. Fencing tokens, IDs of events and jobs, states and every other
// word are compared as they are.
var tourVariable = []struct {
	re  *regexp.Regexp
	sub string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<TIME>"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\dZ`), "<TIME>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "<DUR>"},
	{regexp.MustCompile(`[\w.-]+:\d+:[0-9a-f]{12}\b`), "<HOLDER>"},
	{regexp.MustCompile(`\b[0-9a-f]{32}\b`), "<ID>"},
	{regexp.MustCompile(`[ \t]+`), " "},
	{regexp.MustCompile(`(?m) +$`), ""},
}

func normalizeTour(s string) string {
	for _, v := range tourVariable {
		s = v.re.ReplaceAllString(s, v.sub)
	}
	return strings.TrimRight(s, "\n")
}

// The tour of README.md is what the binary prints: every command of its console blocks runs,
// in order, in a shell against a real `baton serve` on SQLite, from a directory with ./baton
// and the scripts the tour uses (examples/tour), and its output must be the one shown (up to
// times, durations, holder names and lease IDs). A command ending in & runs in the
// background until the test ends; `baton worker` runs until the jobs are done, then gets
// SIGINT, as a user's Ctrl-C (the "^C" line).
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	steps := readmeTour(t)
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "baton.db"))
	// The server's first lease is its maintenance lease (token 1): the README shows it, so wait
	// for it as a reader would have, before the first command.
	waitFor(t, "the maintenance lease", func() bool { return locksJSONHas(t, s, "baton/maintenance") })

	dir := t.TempDir()
	root, _ := filepath.Abs("..")
	for name, target := range map[string]string{"baton": binary, "examples": filepath.Join(root, "examples")} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "BATON_SERVER="+s.url, "BATON_TOKEN=")
	var bg []*exec.Cmd
	defer func() {
		for _, c := range bg {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	}()
	shell := func(cmd string) *exec.Cmd {
		c := exec.Command("bash", "-c", cmd)
		c.Dir, c.Env = dir, env
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}
	lockFlag := regexp.MustCompile(`--lock (\S+)`)
	for _, st := range steps {
		var out []byte
		order := func(s string) string { return s }
		cmd := strings.TrimSpace(regexp.MustCompile(`\s#[^'"]*$`).ReplaceAllString(st.cmd, ""))
		switch {
		case strings.HasSuffix(cmd, "&"):
			c := shell(strings.TrimSuffix(cmd, "&"))
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			bg = append(bg, c)
			if m := lockFlag.FindStringSubmatch(cmd); m != nil {
				waitFor(t, "the lock "+m[1], func() bool { return locksJSONHas(t, s, m[1]) })
			}
		case strings.Contains(cmd, "baton worker"):
			var buf syncBuffer
			c := shell(cmd)
			c.Stdout, c.Stderr = &buf, &buf
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "every job to finish", func() bool { return jobsFinished(t, s) && strings.Count(buf.String(), "job ended") == jobCount(t, s) })
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGINT)
			if err := c.Wait(); err != nil {
				t.Errorf("README.md:%d: the worker exited with %v after SIGINT", st.line, err)
			}
			out = []byte(buf.String())
			st.want = strings.Replace(st.want, "^C\n", "", 1)
			// Job 2 may be claimed (and its start logged) before job 1's end is logged: the
			// worker's lines are compared as a set of lines, not in order.
			order = sortedLines
		default:
			c := shell(cmd)
			out, _ = c.CombinedOutput()
		}
		// The README's reader runs the server on its default address.
		out = bytes.ReplaceAll(out, []byte(s.url), []byte("http://127.0.0.1:7725"))
		if got, want := order(normalizeTour(string(out))), order(normalizeTour(st.want)); got != want {
			t.Errorf("README.md:%d: $ %s\n--- the README shows\n%s\n--- the binary prints\n%s", st.line, st.cmd, st.want, out)
		}
	}
}

func sortedLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// syncBuffer is a bytes.Buffer that a process's output and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func locksJSONHas(t *testing.T, s *daemon, key string) bool {
	_, out := s.baton(context.Background(), nil, "locks", "list", "-o", "json")
	var leases []struct{ Key string }
	_ = json.Unmarshal([]byte(out), &leases)
	for _, l := range leases {
		if l.Key == key {
			return true
		}
	}
	return false
}

func listJobs(t *testing.T, s *daemon) []struct{ State string } {
	_, out := s.baton(context.Background(), nil, "jobs", "list", "-o", "json")
	var jobs []struct{ State string }
	_ = json.Unmarshal([]byte(out), &jobs)
	return jobs
}

func jobCount(t *testing.T, s *daemon) int { return len(listJobs(t, s)) }

// jobsFinished says whether every job has ended (none available, scheduled or running).
func jobsFinished(t *testing.T, s *daemon) bool {
	jobs := listJobs(t, s)
	for _, j := range jobs {
		switch j.State {
		case "available", "scheduled", "running":
			return false
		}
	}
	return len(jobs) > 0
}
