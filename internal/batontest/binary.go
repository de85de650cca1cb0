// Package batontest builds the baton binary from the checkout and runs `baton serve` for tests
// that exercise it the way users run it: as processes, over real stores.
package batontest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangGuard bounds the waits for a server to start: only a hang, never a loaded machine (two
// cores shared with other test packages), may reach it.
const hangGuard = 3 * time.Minute

// Build builds ./cmd/baton of this checkout into the test's temporary directory, with the given
// -ldflags (may be empty), and returns the binary's path.
func Build(t testing.TB, ldflags string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	bin := filepath.Join(t.TempDir(), "baton")
	args := []string{"build", "-o", bin}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.Command("go", append(args, "./cmd/baton")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Server is a running `baton serve`.
type Server struct {
	URL string // http://127.0.0.1:PORT
	PID int    // the process's ID (of the program bin execs, if it is a script that execs)
	log *syncBuffer
}

// Log is what the server printed so far.
func (s *Server) Log() string { return s.log.String() }

var servingURL = regexp.MustCompile(`msg="baton serving" url=(\S+)`)

// Serve starts `bin serve --listen 127.0.0.1:0 args...` with env added to the test's
// environment, waits until it logs its address and /readyz answers 200, and stops it (SIGTERM,
// then SIGKILL) when the test ends.
func Serve(t testing.TB, bin string, env []string, args ...string) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &Server{PID: cmd.Process.Pid, log: &syncBuffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.log.add(line + "\n")
			if m := servingURL.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = pw.Close(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	select {
	case s.URL = <-found:
	case <-exited:
		t.Fatalf("baton serve exited:\n%s", s.Log())
	case <-time.After(hangGuard):
		t.Fatalf("baton serve did not start in %s (hung):\n%s", hangGuard, s.Log())
	}
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := http.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("baton serve not ready in %s (hung):\n%s", hangGuard, s.Log())
		}
		time.Sleep(20 * time.Millisecond) // the process gives no other signal of readiness
	}
}

// Get fetches path from the server and returns the body, failing the test unless it is a 200.
func (s *Server) Get(t testing.TB, path string) string {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, b)
	}
	return string(b)
}

// MetricNames are the sample names a /metrics body exposes (histograms' _bucket, _sum and
// _count included).
func MetricNames(body string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
