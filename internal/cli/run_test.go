//go:build linux

package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// runAsync starts `baton run` in-process against f and returns its stdout and a channel of its
// result. The tests in this file are not parallel: some send signals to the test process.
func (f *fixture) runAsync(t *testing.T, stdin string, args ...string) (*syncBuffer, *syncBuffer, <-chan result) {
	t.Helper()
	var out, errOut syncBuffer
	done := make(chan result, 1)
	args = append([]string{"run", "--server", f.url}, args...)
	go func() {
		code := run(args, strings.NewReader(stdin), &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	return &out, &errOut, done
}

// waitResult waits for an in-process command's result; hangGuard turns a hang into a failure.
func waitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(hangGuard):
		t.Fatalf("the command still runs after %s: hung", hangGuard)
		return result{}
	}
}

// waitSeen waits for marker in buf; hangGuard turns a hang into a failure.
func waitSeen(t *testing.T, buf *syncBuffer, marker string) {
	t.Helper()
	select {
	case <-buf.seen(marker):
	case <-time.After(hangGuard):
		t.Fatalf("%q not seen after %s (hung); output so far:\n%s", marker, hangGuard, buf.String())
	}
}

func (f *fixture) requireFree(t *testing.T, key string) {
	t.Helper()
	if l, err := f.store.Get(context.Background(), key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%q still held after baton run: %+v, %v", key, l, err)
	}
}

func TestRunPassesLeaseStdinAndExitCode(t *testing.T) {
	f := newFixture(t, nil)
	_, _, done := f.runAsync(t, "from stdin\n", "--lock", "jobs/nightly", "--holder", "ci-7", "--",
		"sh", "-c", `read line; echo "$line|$BATON_LOCK_KEY|$BATON_LEASE_ID|$BATON_FENCING_TOKEN"; exit 7`)
	r := waitResult(t, done)
	if r.code != 7 || !regexp.MustCompile(`^from stdin\|jobs/nightly\|[0-9a-f]{32}\|1\n$`).MatchString(r.stdout) {
		t.Fatalf("%s\nwant exit 7 and the line, key, lease ID and token 1", r)
	}
	f.requireFree(t, "jobs/nightly")

	// Death by a signal is 128+N, as shells report it.
	_, _, done = f.runAsync(t, "", "--lock", "jobs/nightly", "--", "sh", "-c", "kill -TERM $$")
	if r := waitResult(t, done); r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("CMD killed by SIGTERM: %s", r)
	}
	f.requireFree(t, "jobs/nightly")
}

func TestRunBusy(t *testing.T) {
	f := newFixture(t, nil)
	held, err := f.client(t, "").Acquire(context.Background(), &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, _, done := f.runAsync(t, "", "--lock", "k", "--no-wait", "--", "echo", "ran")
	r := waitResult(t, done)
	if r.code != exitBusy || r.stdout != "" || !strings.Contains(r.stderr, `lock "k" held by "job-7" (token 1) until `) {
		t.Fatalf("--no-wait on a held key: %s", r)
	}
	start := time.Now()
	_, _, done = f.runAsync(t, "", "--lock", "k", "--wait", "300ms", "--", "echo", "ran")
	r = waitResult(t, done)
	if r.code != exitBusy || r.stdout != "" || !strings.Contains(r.stderr, "waiting up to 300ms") {
		t.Fatalf("--wait 300ms on a held key: %s", r)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up after %s", d)
	}
	if l, err := f.store.Get(context.Background(), "k"); err != nil || l.ID != held.ID {
		t.Fatalf("the holder's lease changed: %+v, %v", l, err)
	}
}

func TestRunWaitsForRelease(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t, "")
	held, err := c.Acquire(context.Background(), &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Count the acquire requests that reach the server.
	target, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var acquires atomic.Int64
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/acquire") {
			acquires.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counted.Close)
	var out, errOut syncBuffer
	done := make(chan result, 1)
	go func() {
		code := run([]string{"run", "--server", counted.URL, "--lock", "k", "--wait", "10m", "--", "sh", "-c", "echo token $BATON_FENCING_TOKEN"},
			strings.NewReader(""), &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	<-f.refused
	released := time.Now()
	if _, err := c.Release(context.Background(), &store.ReleaseParams{Key: "k", LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, done)
	if r.code != 0 || r.stdout != "token 2\n" {
		t.Fatalf("run after the release: %s", r)
	}
	// The server's long-poll hands the key over at the release: the run's first attempt (which
	// does not wait, so that the run can say whom it waits for) is refused, and its second, the
	// long-poll waiting at the server, is answered with the grant. A run that had to ask again
	// would make a third: the held lease had a minute left.
	if n := acquires.Load(); n != 2 {
		t.Fatalf("%d acquire requests; want the refused first attempt and the long-poll, answered at the release", n)
	}
	t.Logf("ran %s after the release", time.Since(released).Round(time.Millisecond))
}

func TestRunLeaseLostTerminatesCMD(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t, "")
	out, _, done := f.runAsync(t, "", "--lock", "k", "--ttl", "3s", "--",
		"sh", "-c", `trap 'echo terminated; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	waitSeen(t, out, "ready")
	if _, err := c.ForceRelease(context.Background(), &store.ForceReleaseParams{Key: "k", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	// The next keepalive renew (every TTL/3) is refused.
	r := waitResult(t, done)
	if r.code != exitLeaseLost || !strings.Contains(r.stdout, "terminated") || !strings.Contains(r.stderr, `lease on "k" lost while CMD ran`) {
		t.Fatalf("lease force-released under CMD: %s", r)
	}
}

func TestRunKillsCMDAfterGrace(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t, "")
	out, _, done := f.runAsync(t, "", "--lock", "k", "--ttl", "3s", "--grace", "200ms", "--",
		"sh", "-c", `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	waitSeen(t, out, "ready")
	if _, err := c.ForceRelease(context.Background(), &store.ForceReleaseParams{Key: "k", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, done)
	if r.code != exitLeaseLost || !strings.Contains(r.stderr, "sending SIGKILL") || !strings.Contains(r.stderr, "status 137") {
		t.Fatalf("CMD ignoring SIGTERM after the loss: %s", r)
	}
}

func TestRunLeaseLostWhenServerUnreachable(t *testing.T) {
	f := newFixture(t, nil)
	out, _, done := f.runAsync(t, "", "--lock", "k", "--ttl", "2s", "--",
		"sh", "-c", `trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	waitSeen(t, out, "ready")
	start := time.Now()
	f.ts.Close()
	r := waitResult(t, done)
	if r.code != exitLeaseLost || !strings.Contains(r.stderr, "unreachable") {
		t.Fatalf("server gone under CMD: %s", r)
	}
	// That CMD stops before the lease expires in the store is TestRunStopsCMDBeforeTheLocalDeadline's
	// check, against the store's own expiry; here, how long it took is only reported.
	t.Logf("CMD stopped %s after the server went away, with a 2s TTL", time.Since(start).Round(time.Millisecond))
}

// With the server gone, renews fail: CMD, which needs 400 ms to exit after SIGTERM, must have
// exited before the lease expired in the store (the expiry the last renew wrote), so before the
// server could give the lock to anyone. baton run sends SIGTERM --grace before the lease's local
// deadline (the last renew's start + TTL*(1-drift) - margin, ~160 ms before that expiry with a
// 6 s TTL) and SIGKILL at it; SIGTERM only at the local deadline would let CMD outlive the expiry
// by its exit time. The check is against the store's expiry, not the local deadline: the local
// deadline is the holder's own safety margin. The TTL is long enough for a --grace (2 s) that
// leaves CMD 1.6 s to spare on a loaded machine.
func TestRunStopsCMDBeforeTheLocalDeadline(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	out, _, done := f.runAsync(t, "", "--lock", "k", "--ttl", "6s", "--grace", "2s", "--",
		"sh", "-c", `trap 'sleep 0.4; date +%s%N > "$0/exited"; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, dir)
	waitSeen(t, out, "ready")
	// Let a renew succeed, then cut the server off right after it.
	before, err := f.store.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	var renewed *store.Lease
	for {
		l, err := f.store.Get(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if l.ExpiresAt.After(before.ExpiresAt) {
			renewed = l
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the store: the renew sends no signal
	}
	f.ts.CloseClientConnections()
	f.ts.Close()
	r := waitResult(t, done)
	if r.code != exitLeaseLost || !strings.Contains(r.stderr, "SIGKILL at the deadline") {
		t.Fatalf("server gone under CMD: %s", r)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "exited"))
	if err != nil {
		t.Fatalf("CMD did not record its exit (killed before its 400 ms?): %v\n%s", err, r)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if exited := time.Unix(0, ns); !exited.Before(renewed.ExpiresAt) {
		t.Fatalf("CMD exited %s after the lease expired in the store", exited.Sub(renewed.ExpiresAt))
	}
}

// A wait longer than the TTL (the key is held until the waiter has waited two TTLs of 3 s) must
// give a lease that holds for as long as CMD runs: a lease's local deadline measured from the
// start of the server-side long-poll would have passed when the grant arrived.
func TestRunAfterAWaitLongerThanTheTTL(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t, "")
	// The holder renews nothing (a minute-long lease released by hand), so that only the
	// waiter's lease depends on timely renewals.
	held, err := c.Acquire(context.Background(), &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, _, second := f.runAsync(t, "", "--lock", "k", "--ttl", "3s", "--wait", "10m", "--", "sh", "-c", "sleep 2; echo done")
	// Once refused, the waiter is waiting; from then on two TTLs (a schedule: a loaded machine
	// only makes the wait longer) before the release.
	<-f.refused
	time.Sleep(2 * 3 * time.Second)
	if _, err := c.Release(context.Background(), &store.ReleaseParams{Key: "k", LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, second)
	if r.code != 0 || !strings.Contains(r.stdout, "done") || strings.Contains(r.stderr, "lost") {
		t.Fatalf("waiter after a wait over the TTL: %s", r)
	}
	f.requireFree(t, "k")
}

func TestRunForwardsSignals(t *testing.T) {
	f := newFixture(t, nil)
	out, _, done := f.runAsync(t, "", "--lock", "k", "--",
		"sh", "-c", `trap 'echo got-usr1' USR1; trap 'echo got-term; exit 9' TERM; echo ready; while :; do sleep 0.05; done`)
	waitSeen(t, out, "ready")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, out, "got-usr1")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, done)
	if r.code != 9 || !strings.Contains(r.stdout, "got-term") {
		t.Fatalf("SIGTERM to baton run: %s\nwant CMD's exit code 9", r)
	}
	f.requireFree(t, "k")
}

func TestRunSignalWhileWaitingGivesUp(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.client(t, "").Acquire(context.Background(), &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, _, done := f.runAsync(t, "", "--lock", "k", "--wait", "1m", "--", "echo", "ran")
	<-f.refused
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, done)
	if r.code != 128+int(syscall.SIGTERM) || r.stdout != "" || !strings.Contains(r.stderr, "giving up") {
		t.Fatalf("SIGTERM while waiting: %s", r)
	}
}

// When the wait runs out before the server answers a waiting attempt (on a loaded machine the
// first attempt can take most of a short wait), baton run still reports the lock busy (exit 75,
// naming the holder it saw), not an unreachable server (exit 1).
func TestRunWaitEndsBeforeAnAnswer(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.client(t, "").Acquire(context.Background(), &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// A proxy that passes the first acquire through and holds every later one unanswered until
	// the client gives up on it.
	target, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var acquires atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/acquire") && acquires.Add(1) > 1 {
			_, _ = io.Copy(io.Discard, r.Body) // the server notices a closed connection only after the body
			<-r.Context().Done()
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	var out, errOut syncBuffer
	code := run([]string{"run", "--server", slow.URL, "--lock", "k", "--wait", "500ms", "--", "echo", "ran"}, strings.NewReader(""), &out, &errOut)
	r := result{code, out.String(), errOut.String()}
	if acquires.Load() < 2 {
		t.Fatalf("baton run made %d acquire requests; the test needs a waiting one: %s", acquires.Load(), r)
	}
	if r.code != exitBusy || r.stdout != "" || strings.Count(r.stderr, `lock "k" held by "job-7"`) != 2 {
		t.Fatalf("wait ended with the waiting attempt unanswered: %s; want exit %d naming the holder", r, exitBusy)
	}
}
