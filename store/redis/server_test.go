package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// server is a redis-server process of the test's own, on a free loopback port.
type server struct {
	t       testing.TB
	port    int
	dir     string
	persist bool
	extra   []string // more redis-server arguments
	cmd     *exec.Cmd
	exited  chan struct{}
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// startServer starts redis-server (with AOF and fsync on every write if persist) and stops it
// when the test ends.
func startServer(t testing.TB, persist bool, extra ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not installed: under CI the Redis backend must be tested (scripts/test.sh installs it)")
		}
		t.Skip("redis-server not installed")
	}
	s := &server{t: t, port: freePort(t), dir: t.TempDir(), persist: persist, extra: extra}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *server) start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--dir", s.dir}
	if s.persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command("redis-server", append(args, s.extra...)...)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	exited := s.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	rdb := goredis.NewClient(&goredis.Options{Addr: s.addr(), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(hangGuard)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil || strings.Contains(err.Error(), "NOAUTH") { // up, and asking for a password
			return
		}
		select {
		case <-exited:
			s.t.Fatalf("redis-server on %d exited: %v", s.port, err)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			s.t.Fatalf("redis-server on %d not answering PING after %s (hung): %v", s.port, hangGuard, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for readiness: no signal to wait on
	}
}

// stop kills the process (SIGKILL: a crash, nothing flushed but what fsync already wrote) and
// waits for it.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// restart is a crash and a restart on the same port and directory.
func (s *server) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

var prefixSeq atomic.Int64

func newPrefix() string { return fmt.Sprintf("t%d:", prefixSeq.Add(1)) }
