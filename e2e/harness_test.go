// Package e2e runs the real baton binary: a server on a free port over SQLite or PostgreSQL,
// and CLI processes against it.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// binary is the baton binary built once for the package.
var binary string

// hangGuard bounds each wait of these tests for a condition (a server ready, a file written, jobs
// done). It is never what a test checks: it only turns a hang into a failure that names what was
// still pending. Minutes, so that a loaded machine (two cores shared with other test packages,
// processes built with -race) cannot reach it while things still move.
const hangGuard = 3 * time.Minute

// soakOnly skips a soak test (TestSoak...: the long variant of another test, larger than
// `make test` needs to check the same promise) unless BATON_SOAK=1, which `make soak` sets.
func soakOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("BATON_SOAK") != "1" {
		t.Skip("a soak test: run it with make soak (BATON_SOAK=1)")
	}
}

// waitFor polls cond until it holds (a separate process gives no other signal), and fails the
// test, naming what it waited for, if hangGuard passes first.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %s: hung", what, hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "baton")
	build := exec.Command("go", "build", "-race", "-o", binary, "github.com/batonhq/baton/cmd/baton")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building baton:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one running `baton serve`.
type daemon struct {
	t     *testing.T
	url   string
	addr  string
	store string
	args  []string
	env   []string // added to this process's environment
	cmd   *exec.Cmd
	log   *os.File
}

// handedOut holds every port freeAddr returned: the tests run in parallel, and a port the kernel
// offers again (after one test closed its probe, or stopped a server it will restart on the
// same address) must not go to a second test, whose readiness poll would then reach the first
// test's server.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeAddr returns a loopback address whose port was free and has not been handed out before in
// this process.
func freeAddr(t *testing.T) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		ln.Close()
		if !handedOut.ports[addr.Port] {
			handedOut.ports[addr.Port] = true
			return addr.String()
		}
	}
}

// startServer runs baton serve on a free loopback port over storeURL and waits until it is ready.
func startServer(t *testing.T, storeURL string, extra ...string) *daemon {
	t.Helper()
	s := &daemon{t: t, addr: freeAddr(t), store: storeURL, args: extra}
	s.url = "http://" + s.addr
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *daemon) start() {
	s.t.Helper()
	args := append([]string{"serve", "--listen", s.addr, "--store", s.store}, s.args...)
	s.cmd = exec.Command(binary, args...)
	if len(s.env) > 0 {
		s.cmd.Env = append(os.Environ(), s.env...)
	}
	log, err := os.CreateTemp(s.t.TempDir(), "serve-*.log")
	if err != nil {
		s.t.Fatal(err)
	}
	s.log = log
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			s.t.Fatalf("baton serve not ready after %s: %v\n%s", hangGuard, err, out)
		}
		time.Sleep(20 * time.Millisecond) // polling the readiness endpoint is the signal
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *daemon) stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			out, _ := os.ReadFile(s.log.Name())
			s.t.Errorf("baton serve exited with %v after SIGTERM\n%s", err, out)
		}
	case <-time.After(hangGuard):
		_ = s.cmd.Process.Kill()
		out, _ := os.ReadFile(s.log.Name())
		s.t.Errorf("baton serve still running %s after SIGTERM: hung\n%s", hangGuard, out)
	}
}

// restart stops the server and starts it again on the same address and store.
func (s *daemon) restart() {
	s.stop()
	s.start()
}

// baton runs the CLI against the server and returns its exit code and output. A command still
// running hangGuard after it started is killed and reported as hung (exit code -1); ctx may end
// it sooner. Safe to call from several goroutines.
func (s *daemon) baton(ctx context.Context, env []string, args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(os.Environ(), "BATON_SERVER="+s.url), env...)
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		s.t.Errorf("baton %v still running after %s: hung\n%s", args, hangGuard, out)
		return -1, string(out)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			s.t.Errorf("baton %v: %v", args, err)
			return -1, string(out)
		}
		code = ee.ExitCode()
	}
	return code, string(out)
}

// stores are the backends the end-to-end tests run against.
func stores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "baton.db") },
		"postgres": postgresURL,
	}
}

// postgresURL names a fresh schema on the test database and drops it after the test.
func postgresURL(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("BATON_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "e2e_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "baton_schema=" + schema
}

// crash kills the server with SIGKILL: no shutdown, nothing flushed but what the store had.
func (s *daemon) crash() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// waitRefusals waits until the server has refused an acquire of a held key at least once (its
// metrics say so): a waiter is then waiting. Polling the metrics is the only signal a separate
// process gives.
func (s *daemon) waitRefusals(t *testing.T, key string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the server to refuse an acquire of %q (a waiter waiting)", key), func() bool {
		resp, err := http.Get(s.url + "/metrics")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, `baton_lock_acquisition_failures_total{reason="held"}`) && !strings.HasSuffix(line, " 0") {
				return true
			}
		}
		return false
	})
}

// auditEvent is the part of an audit log event the end-to-end tests read.
type auditEvent struct {
	Kind    string    `json:"kind"`
	At      time.Time `json:"at"`
	Holder  string    `json:"holder"`
	Token   uint64    `json:"token"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason"`
	LeaseID string    `json:"lease_id"`
}

// events is the audit log of key, oldest first, as `baton events` prints it. Its times are the
// server's: a test that checks how long something took on the server reads them, not its own
// clock, which a loaded machine delays between the event and the test's look at it.
func (s *daemon) events(t *testing.T, key string, env ...string) []auditEvent {
	t.Helper()
	code, out := s.baton(context.Background(), env, "events", "--key", key, "--oldest-first", "-o", "json")
	var evs []auditEvent
	if code != 0 || json.Unmarshal([]byte(out), &evs) != nil {
		t.Fatalf("baton events --key %s: exit %d\n%s", key, code, out)
	}
	return evs
}

// lockExpiry is the expiry of key's live lease as the server reports it: a renewal moves it on.
func (s *daemon) lockExpiry(t *testing.T, key string) time.Time {
	t.Helper()
	var got struct {
		Lease struct {
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"lease"`
	}
	if code := s.call("GET", "/v1/locks/"+key, nil, &got); code != 200 || got.Lease.ExpiresAt.IsZero() {
		t.Fatalf("GET /v1/locks/%s: %d %+v", key, code, got)
	}
	return got.Lease.ExpiresAt
}
