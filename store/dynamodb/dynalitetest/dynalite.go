// Package dynalitetest starts dynalite (a DynamoDB-compatible server on LevelDB, npm package
// 4.x) for tests: on a free loopback port, with a data directory of its own so that it can be
// restarted on the same data. scripts/dynalite.sh installs it; BATON_DYNALITE names its
// executable (default: where that script installs it). Without it a test is skipped, or fails
// when CI is set.
package dynalitetest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region and Credentials are what tests sign with; dynalite accepts any.
const (
	Region    = "us-east-1"
	AccessKey = "baton-test"
	SecretKey = "baton-test-secret"
)

// Credentials signs test requests.
var Credentials = credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")

// wrapper runs dynalite's cli.js. dynalite 4.0.0 throws from a request's "error" handler
// when a client hangs up mid-request (ECONNRESET: a cancelled context), which kills the whole
// server; DynamoDB does not die when a client hangs up, so that one error is ignored.
const wrapper = `process.on('uncaughtException', function (err) {
  if (err && err.code === 'ECONNRESET') return
  console.error(err)
  process.exit(1)
})
require(%q)
`

// Server is a running dynalite.
type Server struct {
	node, wrapper string
	dir, addr     string
	cmd           *exec.Cmd
	exited        chan struct{}
}

// Bin returns the dynalite executable, skipping (or failing under CI) if it is not installed.
func Bin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("BATON_DYNALITE")
	if bin == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		bin = filepath.Join(cache, "baton", "dynalite", "node_modules", ".bin", "dynalite")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("dynalite not installed at %s (run scripts/dynalite.sh): %v", bin, err)
		}
		t.Skipf("dynalite not installed at %s (run scripts/dynalite.sh)", bin)
	}
	return bin
}

// Start starts a server on a fresh data directory and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("dynalite needs node: %v", err)
	}
	cli, err := filepath.EvalSymlinks(Bin(t))
	if err != nil {
		t.Fatal(err)
	}
	d := &Server{node: node, wrapper: filepath.Join(t.TempDir(), "dynalite.js"), dir: t.TempDir(), addr: addr}
	if err := os.WriteFile(d.wrapper, []byte(fmt.Sprintf(wrapper, cli)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d
}

// Endpoint is the server's URL.
func (d *Server) Endpoint() string { return "http://" + d.addr }

// Start (re)starts the server on its port and data directory.
func (d *Server) Start() error {
	_, port, _ := net.SplitHostPort(d.addr)
	d.cmd = exec.Command(d.node, d.wrapper, "--host", "127.0.0.1", "--port", port, "--path", d.dir,
		"--createTableMs", "20", "--deleteTableMs", "20", "--updateTableMs", "20")
	d.cmd.Stdout, d.cmd.Stderr = io.Discard, os.Stderr // stdout: only "listening at", which interleaves with test output
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("start dynalite: %w", err)
	}
	exited := make(chan struct{})
	d.exited = exited
	cmd := d.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	// Ready when it accepts connections; failed if it exits first. The cap is only against a
	// server that neither listens nor exits.
	for start := time.Now(); time.Since(start) < 2*time.Minute; {
		select {
		case <-exited:
			return fmt.Errorf("dynalite exited before listening on %s", d.addr)
		default:
		}
		if c, err := net.Dial("tcp", d.addr); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond) // a process that gives no other signal
	}
	d.Stop()
	return fmt.Errorf("dynalite not listening on %s", d.addr)
}

// Stop kills the server and waits for it to exit; its data directory stays.
func (d *Server) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
}
