package chaos

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is one `baton serve`, restartable on the same address and store.
type server struct {
	t     *testing.T
	addr  string
	url   string
	store string
	extra []string
	log   *os.File
	// argv runs baton: nil for the harness's binary; else a command line ending in a baton
	// binary (one under `ip netns exec`, one built with the chaosclock tag).
	argv []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

func startServer(t *testing.T, store string, extra ...string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	log, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, addr: addr, url: "http://" + addr, store: store, extra: extra, log: log}
	t.Cleanup(s.stop)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs baton serve and waits until /readyz answers 200 (the readiness endpoint is the
// signal; the 2-minute bound only catches a server that never comes up). It returns an error
// rather than failing the test: faults restart the server from a goroutine of their own.
func (s *server) start() error {
	argv := append(append([]string{}, s.argv...), "serve", "--listen", s.addr, "--store", s.store)
	if s.argv == nil {
		argv = append([]string{binary}, argv...)
	}
	cmd := exec.Command(argv[0], append(argv[1:], s.extra...)...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// The kernel kills the server when the test process dies, however it dies (a timeout's
	// panic, a kill of go test): without it a killed run left baton serve running, holding its
	// port and its store. The harness never locks a goroutine to its thread, so the thread that
	// started the server lives as long as the process (Pdeathsig follows the thread).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(s.log.Name())
			return fmt.Errorf("baton serve exited while starting: %s\n%s", cmd.ProcessState, tail(out, 4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.log.Name())
			return fmt.Errorf("baton serve not ready after 2m: %v\n%s", err, tail(out, 4000))
		}
	}
}

// crash kills the server with SIGKILL and starts it again on the same address and store.
func (s *server) crash() error {
	s.kill9()
	return s.start()
}

// kill9 kills the server as a crash would, and waits until the process is gone.
func (s *server) kill9() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	_ = cmd.Process.Kill()
	<-exited
}

func (s *server) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// auditEvent is one event of the audit log (GET /v1/events).
type auditEvent struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	Key    string    `json:"key"`
	Holder string    `json:"holder"`
	Token  uint64    `json:"token"`
	// Job events (job_claim, job_complete): the job, its attempt and how the attempt ended.
	JobID   int64  `json:"job_id"`
	Attempt int    `json:"attempt"`
	Outcome string `json:"outcome"`
}

// events reads every page of the audit log for key.
func (s *server) events(key string) []auditEvent {
	s.t.Helper()
	var all []auditEvent
	cursor := ""
	for {
		q := url.Values{"key": {key}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Events     []auditEvent `json:"events"`
			NextCursor string       `json:"next_cursor"`
		}
		s.getJSON("/v1/events?"+q.Encode(), &page)
		all = append(all, page.Events...)
		if page.NextCursor == "" || len(page.Events) == 0 {
			return all
		}
		cursor = page.NextCursor
	}
}

func (s *server) getJSON(path string, out any) {
	s.t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		s.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
}

// batonCLI runs a client command of the baton binary against the server.
func (s *server) batonCLI(args ...string) {
	s.t.Helper()
	out, err := exec.Command(binary, append(args, "--server", s.url)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("baton %v: %v\n%s", args, err, out)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
