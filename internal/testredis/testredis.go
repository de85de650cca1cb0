// Package testredis starts redis-server processes of a test's own, for the tests of packages
// that talk to Redis (the store URL parser, baton serve). The store/redis tests keep their own
// servers, which they also crash and restart.
package testredis

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Start runs redis-server on a free loopback port, without persistence unless extra says
// otherwise, waits until it answers PING, and kills it when the test ends. It returns the
// server's host:port. Without redis-server the test is skipped, or fails when CI is set.
func Start(t testing.TB, extra ...string) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed (CI is set: the test script installs it)")
		}
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	cmd := exec.Command("redis-server", append(args, extra...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := rdb.Ping(context.Background()).Err(); err == nil {
			return addr
		} else if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s: %v", addr, err)
		}
		select {
		case <-exited:
			t.Fatal("redis-server exited")
		case <-time.After(20 * time.Millisecond): // polling for readiness: the server sends no signal
		}
	}
}
