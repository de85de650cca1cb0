package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			var wg sync.WaitGroup
			codes := make([]int, 20)
			outs := make([]string, 20)
			for i := range 20 {
				wg.Go(func() {
					// The runs take turns: the last waits for the other 19, however long a loaded
					// machine makes that. Its --wait is no bound on that; the hang guard is.
					codes[i], outs[i] = s.baton(context.Background(), []string{"DIR=" + dir},
						"run", "--lock", "same", "--ttl", "10s", "--wait", hangGuard.String(), "--", "sh", "-c", criticalSection)
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
func waitFile(t *testing.T, path string) {
	t.Helper()
	waitFor(t, path+" to be created", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// kill -9 of a `baton run` that holds the lock: its command dies with it, and the next waiter
// gets the lock when the lease expires, by taking it over (not after its own wait ran out).
func TestKilledRunnerHandsOverAtExpiry(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			killedRunnerHandsOver(t, storeURL(t))
		})
	}
}

func killedRunnerHandsOver(t *testing.T, storeURL string) {
	s := startServer(t, storeURL)
	dir := t.TempDir()
	const ttl = 3 * time.Second
	first, _ := startRun(t, s, dir, "run", "--lock", "k9", "--holder", "first", "--ttl", ttl.String(), "--", "sh", "-c",
		`echo $$ > "$DIR/child"; touch "$DIR/started"; exec sleep 120`)
	waitFile(t, filepath.Join(dir, "started"))
	killed := time.Now()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	// The next holder's command records the instant it got the lock (it runs only once the
	// lease is granted); the runner's own exit afterwards is not part of the handover.
	code, out := s.baton(context.Background(), []string{"DIR=" + dir}, "run", "--lock", "k9", "--holder", "next",
		"--wait", hangGuard.String(), "--", "sh", "-c", `date +%s%N > "$DIR/got"`)
	if code != 0 {
		t.Fatalf("next run exited %d: %s", code, out)
	}
	// What happened, as the server recorded it: the dead runner's lease was taken over once it
	// expired, by the next run, with a larger token. How soon after the kill depends on the
	// machine's load and is logged, not checked (the handoff benchmarks measure it).
	// (On a store with a line, the next run's ticket joining it is an event too; skipped here.)
	evs := slices.DeleteFunc(s.events(t, "k9"), func(e auditEvent) bool { return e.Kind == "ticket_enqueue" })
	if len(evs) != 3 || evs[0].Kind != "acquire" || evs[0].Holder != "first" ||
		evs[1].Kind != "expiry_takeover" || evs[1].Holder != "next" || evs[1].Token <= evs[0].Token || evs[2].Kind != "release" {
		t.Fatalf("audit log of k9: %+v; want first's acquire, next's expiry takeover with a larger token, its release", evs)
	}
	// The killed runner's command must not outlive it (it would overlap the next holder).
	raw, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the command of the killed runner (pid %d) is still running", pid)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "got"))
	if err != nil {
		t.Fatal(err)
	}
	gotNs, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	t.Logf("handover %s after kill -9 (TTL %s)", time.Unix(0, gotNs).Sub(killed).Round(time.Millisecond), ttl)
}

// A server restart while `baton run` holds a lock: the run keeps its lease, renews it with the
// restarted server, its command finishes, and it releases cleanly.
func TestServerRestartDuringRun(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			// A TTL that a restart of a -race binary on a loaded machine fits in several times
			// over (it renews every TTL/3): the run must ride out the restart, not race it.
			const ttl = 15 * time.Second
			run, out := startRun(t, s, dir, "run", "--lock", "r", "--ttl", ttl.String(), "--", "sh", "-c",
				`touch "$DIR/started"; while [ ! -e "$DIR/go" ]; do sleep 0.05; done; echo "token $BATON_FENCING_TOKEN"`)
			waitFile(t, filepath.Join(dir, "started"))
			before := s.lockExpiry(t, "r")
			s.restart()
			// A renewal (every TTL/3) reaches the restarted server: the lease's expiry moves on.
			waitFor(t, "a renewal of r by the restarted server", func() bool {
				if run.ProcessState != nil {
					t.Fatalf("baton run exited across the restart:\n%s", out)
				}
				return s.lockExpiry(t, "r").After(before)
			})
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			err := run.Wait()
			if err != nil {
				t.Fatalf("baton run across a server restart: %v\n%s", err, out)
			}
			// Released cleanly: the lock is free at once, not after its TTL.
			code, status := s.baton(context.Background(), nil, "locks", "status", "r")
			if code != 0 || !strings.Contains(status, "free") {
				t.Fatalf("after the run: locks status = %d %s; want free", code, status)
			}
		})
	}
}

// A waiter whose wait is more than twice its TTL (3 s) gets a lease that holds while its command
// runs, and exits 0: its local deadline counts from the grant, not from the start of the wait
// (counted from the start, the lease would be lost on arrival, exit 76).
func TestRunAfterAWaitLongerThanTheTTL(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t))
			// The holder renews nothing: a minute-long lease released by hand once the waiter has
			// waited long enough, so that only the waiter's lease depends on timely renewals.
			code, out := s.baton(context.Background(), nil, "locks", "acquire", "k", "--holder", "holder", "--ttl", "1m", "-o", "json")
			var held struct {
				LeaseID string `json:"lease_id"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &held) != nil {
				t.Fatalf("locks acquire: %d %s", code, out)
			}
			dir := t.TempDir()
			waiter, wout := startRun(t, s, dir, "run", "--lock", "k", "--ttl", "3s", "--wait", hangGuard.String(), "--", "sh", "-c", "sleep 2; echo done")
			// Once the waiter is refused it is waiting; from then on, two TTLs of waiting (a
			// schedule: a loaded machine only makes the wait longer) before the release.
			s.waitRefusals(t, "k")
			time.Sleep(2 * 3 * time.Second)
			if code, out := s.baton(context.Background(), nil, "locks", "release", "k", "--lease", held.LeaseID); code != 0 {
				t.Fatalf("release: %d %s", code, out)
			}
			if err := waiter.Wait(); err != nil || !strings.Contains(wout.String(), "done") || strings.Contains(wout.String(), "lost") {
				t.Fatalf("waiter: %v\n%s", err, wout)
			}
		})
	}
}

// Waiting survives a crash of the server: a run waiting for a held lock while the server is
// killed with SIGKILL and restarted keeps waiting and runs once the holder is done, instead of
// exiting 1 at the first refused connection.
func TestRunWaitsThroughAServerCrash(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, storeURL(t))
			dir := t.TempDir()
			// The holder's TTL outlasts the restart; its command ends when told to.
			holder, hout := startRun(t, s, dir, "run", "--lock", "w", "--ttl", "20s", "--", "sh", "-c",
				`touch "$DIR/held"; while [ ! -e "$DIR/go" ]; do sleep 0.05; done`)
			waitFile(t, filepath.Join(dir, "held"))
			waiter, wout := startRun(t, s, dir, "run", "--lock", "w", "--ttl", "2s", "--wait", hangGuard.String(), "--", "sh", "-c", `echo "waiter ran"`)
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
