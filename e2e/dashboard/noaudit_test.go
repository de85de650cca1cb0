package dashboard

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardNoAuditLog: on a store without an audit log (Redis: leases only) the dashboard
// offers no Events page and no lock history, rather than pages that fail with a 501; and no job
// pages, since the store has no job queue.
func TestDashboardNoAuditLog(t *testing.T) {
	needChromium(t)
	d := startServerOn(t, "redis://"+startRedis(t)+"/0?baton_allow_volatile=true")
	d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "locks/alpha", "holder": "ci-7", "ttl_ms": 3600000})
	if info := d.must(200, "", "GET", "/v1/info", nil); info["audit"] != false || info["jobs"] != false {
		t.Fatalf("GET /v1/info on Redis: %v", info)
	}
	ctx := browser(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(d.url+"/"), hasText("main", "locks/alpha"), hasText("#who", "anonymous (admin)"),
		until(`document.querySelector('#nav a[data-page=events]').hidden`),
		until(`document.querySelector('#nav a[data-page=jobs]').hidden`),
		until(`!document.querySelector('#nav a[data-page=locks]').hidden`))
	do(t, ctx, page("#/locks/locks%2Falpha", "Lock locks/alpha"), hasText("main", "ci-7", "Force-release"))
	if n := eval[int](t, ctx, `document.querySelectorAll('main h2, main table').length`); n != 0 {
		t.Errorf("the lock page on a store without an audit log shows %d history headings or tables", n)
	}
	shot(t, ctx, "no-audit-lock")
	do(t, ctx, page("#/events", "Events"), hasText("main", "keeps no audit log"))
	if n := eval[int](t, ctx, `document.querySelectorAll('main table').length`); n != 0 {
		t.Errorf("the events page on a store without an audit log shows %d tables", n)
	}
}

// startRedis runs redis-server without persistence on a free loopback port until the test ends,
// and returns its address once it answers PING. (internal/testredis does the same with the
// go-redis client, which this module does not otherwise need.) Without redis-server the test
// is skipped, or fails under CI.
func startRedis(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed (CI is set: scripts/test.sh installs it)")
		}
		t.Skip("redis-server is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil && line == "+PONG\r\n" {
				return addr
			}
		}
		select {
		case <-exited:
			t.Fatal("redis-server exited before it answered")
		case <-time.After(20 * time.Millisecond): // redis-server signals readiness only by answering
		}
	}
}
