package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// A malformed duration in the environment is an error naming the variable, not a silent default.
func TestServeRejectsBadDurationEnv(t *testing.T) {
	t.Setenv("BATON_REAP_INTERVAL", "soon")
	var out, errOut bytes.Buffer
	code := serveCommand([]string{"--listen", "127.0.0.1:0", "--store", "sqlite://" + t.TempDir() + "/b.db"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "BATON_REAP_INTERVAL") {
		t.Fatalf("exit %d, stderr %q; want 2 naming BATON_REAP_INTERVAL", code, errOut.String())
	}
}

// redisServer starts a redis-server without persistence on a free loopback port, killed when the
// test ends; the test is skipped if redis-server is not installed.
func redisServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		} else if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s: %v", addr, err)
		}
		select {
		case <-exited:
			t.Fatal("redis-server exited")
		case <-time.After(20 * time.Millisecond): // polling for readiness
		}
	}
}

// On a Redis server without persistence, baton serve refuses to start (its fencing tokens would
// repeat after a restart), saying why and how to opt out; with baton_allow_volatile=true it
// starts and warns through its own logger, naming the server's settings.
func TestServeRedisWithoutPersistence(t *testing.T) {
	addr := redisServer(t)
	var out, errOut bytes.Buffer
	code := serveCommand([]string{"--listen", "127.0.0.1:0", "--store", "redis://" + addr}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "baton_allow_volatile=true") || !strings.Contains(errOut.String(), "appendonly=no") {
		t.Fatalf("exit %d, stderr %q; want 1, refusing with the settings and the opt-out", code, errOut.String())
	}
	logged := &startLog{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := serveFlags{listen: "127.0.0.1:0", store: "redis://" + addr + "?baton_allow_volatile=true", shutdownGrace: time.Second}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f, slog.New(slog.NewTextHandler(logged, nil))) }()
	select {
	case <-logged.started:
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve with baton_allow_volatile=true: %v", err)
		}
	case err := <-done:
		t.Fatalf("serve with baton_allow_volatile=true ended before serving: %v\n%s", err, logged.String())
	}
	for _, want := range []string{"level=WARN", "does not persist every write", "appendonly=no", "appendfsync=everysec"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("serve's log lacks %q:\n%s", want, logged.String())
		}
	}
}

// startLog collects a log and closes started once "baton serving" is logged.
type startLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	started chan struct{}
}

func (l *startLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if bytes.Contains(p, []byte("baton serving")) {
		close(l.started)
	}
	return len(p), nil
}

func (l *startLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
