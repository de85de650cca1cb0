package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// served is a server run through HTTPServer on a loopback listener, as baton serve runs it.
type served struct {
	addr string
	srv  *server.Server
}

func serveHTTP(t *testing.T, withAuth bool, set func(*server.Config)) *served {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if withAuth {
		a, err := server.ParseAuth(strings.NewReader("writer write " + server.HashToken(writeToken) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = a
	}
	if set != nil {
		set(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, capped := srv.HTTPServer(ln, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(capped) }()
	t.Cleanup(func() {
		srv.Close()
		_ = hs.Close()
		<-done
		st.Close()
	})
	return &served{addr: ln.Addr().String(), srv: srv}
}

// stall opens a connection and sends a POST's headers with a Content-Length but no body.
func (s *served) stall(t *testing.T, path, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	authz := ""
	if token != "" {
		authz = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n%s\r\n", path, s.addr, authz); err != nil {
		t.Fatal(err)
	}
	return c
}

// answerThenClose reads the one answer on c and checks that the server then closes c. The
// minute is only a fail-safe for a server that never closes: the waits under test are 500 ms.
func answerThenClose(t *testing.T, c net.Conn, what string) *http.Response {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", what, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); err == nil {
		t.Fatalf("%s: more data after the answer", what)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open after its %d answer", what, resp.StatusCode)
	}
	return resp
}

// A body that never comes: refused requests (no token, an unknown token) are answered at once
// with Connection: close and their connection closed without waiting for the body; an
// authorized request's body that stalls is answered 408 at the body deadline, and closed.
func TestStalledBodiesAreAnsweredAndClosed(t *testing.T) {
	s := serveHTTP(t, true, func(c *server.Config) { c.BodyTimeout = 300 * time.Millisecond })
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"not-a-token", 401}, {writeToken, 408}} {
		conn := s.stall(t, "/v1/locks/renew", c.token)
		resp := answerThenClose(t, conn, fmt.Sprintf("token %q", c.token))
		if resp.StatusCode != c.want || !resp.Close {
			t.Errorf("token %q: %d, Connection: close %v; want %d and close", c.token, resp.StatusCode, resp.Close, c.want)
		}
	}
	// Without a body deadline at all, a refused request's connection is still not held.
	s = serveHTTP(t, true, func(c *server.Config) { c.BodyTimeout = -1 })
	if resp := answerThenClose(t, s.stall(t, "/v1/jobs/batch", "nope"), "no body deadline"); resp.StatusCode != 401 {
		t.Errorf("no body deadline: %d, want 401", resp.StatusCode)
	}
}

// The body deadline does not reach a long-poll: an acquire whose small body arrived at once
// waits its whole wait, well past the body deadline, and is answered (409 lock_held); the
// connection then serves the next request. (http.Server.ReadTimeout would cancel the wait.)
func TestBodyDeadlineSparesLongPolls(t *testing.T) {
	s := serveHTTP(t, false, func(c *server.Config) {
		c.BodyTimeout = 50 * time.Millisecond
		c.MaxWait = 1500 * time.Millisecond
	})
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	post := func(body string) (int, string) {
		resp, err := hc.Post("http://"+s.addr+"/v1/locks/acquire", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if code, raw := post(`{"key":"k","holder":"a","ttl_ms":60000}`); code != 200 {
		t.Fatalf("acquire: %d %s", code, raw)
	}
	start := time.Now()
	code, raw := post(`{"key":"k","holder":"b","wait_ms":1500}`)
	if code != 409 || !strings.Contains(raw, "lock_held") {
		t.Fatalf("a long-poll past the body deadline: %d %s; want 409 lock_held after its wait", code, raw)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("the long-poll was answered after %s, before its wait", waited)
	}
	if code, raw := post(`{"key":"k2","holder":"b"}`); code != 200 {
		t.Fatalf("the next request on the connection: %d %s", code, raw)
	}
}

// Past MaxConns, a new connection is answered 503 overloaded at once and closed; once a
// connection closes, its place is free again.
func TestConnectionCap(t *testing.T) {
	s := serveHTTP(t, false, func(c *server.Config) { c.MaxConns = 3 })
	var open []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// An answer on each shows it was accepted, and counted.
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", s.addr)
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection under the cap: %v %v", resp, err)
		}
		open = append(open, c)
	}
	over, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	resp := answerThenClose(t, over, "a connection over the cap")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("over the cap: %d %v; want 503 with Retry-After", resp.StatusCode, resp.Header)
	}
	open[0].Close()
	// The server notices the close when it reads the connection; try until a place is free.
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", s.addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if i == 1000 {
			t.Fatalf("no place freed after a connection closed: %v %v", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Job batch bodies are read under a budget: while a largest batch is being read (here its body
// stalls), others wait without reading theirs, up to 16; the next is answered 503 overloaded
// with Retry-After at once. A batch whose body is larger than the limit is 413 and closed.
func TestBatchBodiesWaitForBudget(t *testing.T) {
	s := serveHTTP(t, false, func(c *server.Config) { c.BodyTimeout = -1 })
	stallBatch := func() net.Conn {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/jobs/batch HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", s.addr, server.MaxJobBatchBodyBytes)
		return c
	}
	stallBatch() // holds the whole budget while its body does not come
	for range 16 {
		stallBatch()
	}
	hc := &http.Client{}
	metrics := func() string {
		resp, err := hc.Get("http://" + s.addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return string(raw)
	}
	for i := 0; ; i++ {
		if v, _ := metricValue(metrics(), "baton_http_batch_bodies_waiting"); v == 16 {
			break
		}
		if i == 1000 {
			t.Fatalf("16 batches never waited:\n%s", metrics())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := hc.Post("http://"+s.addr+"/v1/jobs/batch", "application/json", strings.NewReader(`{"jobs":[{"kind":"k","resource":"r"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(raw), `"overloaded"`) {
		t.Fatalf("a batch past the queue: %d %v %s; want 503 overloaded with Retry-After", resp.StatusCode, resp.Header, raw)
	}

	s = serveHTTP(t, false, nil)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"jobs":[{"kind":"k","resource":"r","args":{"pad":"` + strings.Repeat("x", server.MaxJobBatchBodyBytes) + `"}}]}`
	go func() {
		fmt.Fprintf(c, "POST /v1/jobs/batch HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.addr, len(body), body)
	}()
	if resp := answerThenClose(t, c, "a batch over the limit"); resp.StatusCode != 413 {
		t.Fatalf("a batch over the limit: %d, want 413", resp.StatusCode)
	}
}
