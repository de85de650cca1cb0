package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// criticalSection fails loudly if two commands are ever inside it together (mkdir is atomic),
// and records each holder's fencing token in the order they entered.
const criticalSection = `
if ! mkdir "$DIR/inside" 2>/dev/null; then echo "overlap: $BATON_FENCING_TOKEN" >> "$DIR/overlaps"; exit 99; fi
echo "$BATON_FENCING_TOKEN" >> "$DIR/tokens"
sleep 0.05
rmdir "$DIR/inside"
`

// 20 concurrent `baton run` processes on one lock: no overlap, every run got a larger token
// than the one before, every run succeeded.
func TestRunIsADistributedFlock(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			codes := make([]int, 20)
			outs := make([]string, 20)
			for i := range 20 {
				wg.Go(func() {
					codes[i], outs[i] = s.baton(ctx, []string{"DIR=" + dir},
						"run", "--lock", "same", "--ttl", "10s", "--wait", "2m", "--", "sh", "-c", criticalSection)
				})
			}
			wg.Wait()
			for i, c := range codes {
				if c != 0 {
					t.Errorf("run %d exited %d: %s", i, c, outs[i])
				}
			}
			if overlaps, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
				t.Fatalf("critical sections overlapped:\n%s", overlaps)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "tokens"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Fields(string(raw))
			if len(lines) != 20 {
				t.Fatalf("%d runs entered the critical section, want 20", len(lines))
			}
			prev := uint64(0)
			for _, l := range lines {
				tok, err := strconv.ParseUint(l, 10, 64)
				if err != nil || tok <= prev {
					t.Fatalf("tokens in order of entry %v: %q does not follow %d", lines, l, prev)
				}
				prev = tok
			}
		})
	}
}

// startRun starts `baton run` in the background; CMD touches $DIR/started once it holds the lock.
func startRun(t *testing.T, s *daemon, dir string, args ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "BATON_SERVER="+s.url, "DIR="+dir)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return cmd, out
}

// waitFile waits for a file that a command creates: the only signal a shell command can give.
func waitFile(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not created within %s", path, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill -9 of a `baton run` that holds the lock: its command dies with it, and the next waiter
// gets the lock within TTL + 1 s.
func TestKilledRunnerHandsOverWithinTTL(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) { killedRunnerHandsOver(t, storeURL(t)) })
	}
}

func killedRunnerHandsOver(t *testing.T, storeURL string) {
	s := startServer(t, storeURL)
	dir := t.TempDir()
	const ttl = 3 * time.Second
	first, _ := startRun(t, s, dir, "run", "--lock", "k9", "--ttl", ttl.String(), "--", "sh", "-c",
		`echo $$ > "$DIR/child"; touch "$DIR/started"; exec sleep 120`)
	waitFile(t, filepath.Join(dir, "started"), 30*time.Second)
	killed := time.Now()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The next holder's command records the instant it got the lock (it runs only once the
	// lease is granted); the runner's own exit afterwards is not part of the handover.
	code, out := s.baton(ctx, []string{"DIR=" + dir}, "run", "--lock", "k9", "--wait", "30s", "--", "sh", "-c", `date +%s%N > "$DIR/got"`)
	if code != 0 {
		t.Fatalf("next run exited %d: %s", code, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "got"))
	if err != nil {
		t.Fatal(err)
	}
	gotNs, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Unix(0, gotNs).Sub(killed)
	if took > ttl+time.Second {
		t.Fatalf("the next waiter got the lock %s after the kill, more than TTL + 1s (%s)", took, ttl+time.Second)
	}
	// The killed runner's command must not outlive it (it would overlap the next holder).
	raw, err = os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the command of the killed runner (pid %d) is still running", pid)
	}
	t.Logf("handover %s after kill -9 (TTL %s)", took.Round(time.Millisecond), ttl)
}

// A server restart while `baton run` holds a lock: the run keeps its lease (renewing again once
// the server is back within the TTL), its command finishes, and it releases cleanly.
func TestServerRestartDuringRun(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			run, out := startRun(t, s, dir, "run", "--lock", "r", "--ttl", "6s", "--", "sh", "-c",
				`touch "$DIR/started"; while [ ! -e "$DIR/go" ]; do sleep 0.05; done; echo "token $BATON_FENCING_TOKEN"`)
			waitFile(t, filepath.Join(dir, "started"), 30*time.Second)
			s.restart()
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			err := run.Wait()
			if err != nil {
				t.Fatalf("baton run across a server restart: %v\n%s", err, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Released cleanly: the lock is free at once, not after its TTL.
			code, status := s.baton(ctx, nil, "locks", "status", "r")
			if code != 0 || !strings.Contains(status, "free") {
				t.Fatalf("after the run: locks status = %d %s; want free", code, status)
			}
		})
	}
}

// The report of issue 9, as a user ran it: a waiter whose wait (about 6 s) is twice its TTL
// (3 s) gets a lease that holds while its command runs, and exits 0. Before the fix it lost the
// lease on arrival (exit 76).
func TestRunAfterAWaitLongerThanTheTTL(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			first, out1 := startRun(t, s, dir, "run", "--lock", "k", "--ttl", "3s", "--", "sh", "-c", `touch "$DIR/started"; sleep 8`)
			waitFile(t, filepath.Join(dir, "started"), 30*time.Second)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code, out := s.baton(ctx, nil, "run", "--lock", "k", "--ttl", "3s", "--wait", "1m", "--", "sh", "-c", "sleep 2; echo done")
			if code != 0 || !strings.Contains(out, "done") || strings.Contains(out, "lost") {
				t.Fatalf("waiter: exit %d\n%s", code, out)
			}
			if err := first.Wait(); err != nil {
				t.Fatalf("holder: %v\n%s", err, out1)
			}
			if waited := time.Since(start) - 2*time.Second; waited < 3*time.Second {
				t.Fatalf("the waiter waited about %s, not past its 3s TTL: the test lost its point", waited)
			}
		})
	}
}

// Waiting survives a crash of the server: a run waiting for a held lock while the server is
// killed with SIGKILL and restarted keeps waiting and runs once the holder is done, instead of
// exiting 1 at the first refused connection.
func TestRunWaitsThroughAServerCrash(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			// The holder's TTL outlasts the restart; its command ends when told to.
			holder, hout := startRun(t, s, dir, "run", "--lock", "w", "--ttl", "20s", "--", "sh", "-c",
				`touch "$DIR/held"; while [ ! -e "$DIR/go" ]; do sleep 0.05; done`)
			waitFile(t, filepath.Join(dir, "held"), 30*time.Second)
			waiter, wout := startRun(t, s, dir, "run", "--lock", "w", "--ttl", "2s", "--wait", "2m", "--", "sh", "-c", `echo "waiter ran"`)
			s.waitRefusals(t, "w")
			s.crash()
			s.start()
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := holder.Wait(); err != nil {
				t.Fatalf("holder across the crash: %v\n%s", err, hout)
			}
			if err := waiter.Wait(); err != nil || !strings.Contains(wout.String(), "waiter ran") {
				t.Fatalf("waiter across the crash: %v\n%s", err, wout)
			}
		})
	}
}
