package chaos

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisServer is a redis-server of the harness's own: a free loopback port, a temporary
// directory, AOF with an fsync on every write and no RDB snapshots, so that the fencing-token
// counter survives a kill -9 (baton serve refuses a Redis without that unless the store URL says
// baton_allow_volatile=true; the harness does not).
type redisServer struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts the server, or skips the test if redis-server is not installed (fails if CI
// is set).
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not found and CI is set: install redis-server")
		}
		t.Skip("redis-server not found: Redis chaos test skipped")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &redisServer{dir: t.TempDir(), port: ln.Addr().(*net.TCPAddr).Port}
	ln.Close()
	t.Cleanup(r.kill9)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs redis-server and waits until it answers PING with PONG (not LOADING: after a
// crash it first replays the AOF). The 30 s bound only catches a server that never comes up.
func (r *redisServer) start() error {
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--logfile", filepath.Join(r.dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.ping()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			return fmt.Errorf("redis-server exited while starting: %s\n%s", cmd.ProcessState, tail(log, 4000))
		case <-time.After(20 * time.Millisecond): // polling for readiness: no signal to wait on
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %d not answering PING after 30s: %v", r.port, err)
		}
	}
}

func (r *redisServer) ping() error {
	c, err := net.DialTimeout("tcp", r.addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING: %s", line)
	}
	return nil
}

// kill9 kills the server as a crash would (nothing survives but what fsync wrote) and waits
// until it is gone.
func (r *redisServer) kill9() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// restart is a kill -9 and a start on the same port and directory: the AOF replays.
func (r *redisServer) restart() error {
	r.kill9()
	return r.start()
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) url() string { return "redis://" + r.addr() + "/0?baton_prefix=chaos:" }
