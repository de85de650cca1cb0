package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// hostRequest sends a request with the given Host header (and browser headers) and returns the
// status and the problem's code and detail.
func hostRequest(t *testing.T, f *fixture, method, path, host, token, body string, hdr map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p struct{ Code, Detail string }
	_ = json.Unmarshal(raw, &p)
	return resp.StatusCode, p.Code, p.Detail
}

// rebinding are the headers of a page of evil.example whose name was rebound to the server's
// loopback address: to the browser, the page and the server are one origin.
var rebinding = map[string]string{"Origin": "http://evil.example:7725", "Sec-Fetch-Site": "same-origin"}

// A server without auth makes every caller admin, and a DNS-rebinding page is same-origin to
// the browser: only the Host header tells it apart. Every route, reads included, refuses a Host
// that is not a loopback name, naming the rule and the way to allow a name; nothing is changed.
func TestHostCheckStopsDNSRebinding(t *testing.T) {
	f := newConfigFixture(t, false, nil)
	r := f.post("/v1/locks/acquire", "", `{"key":"deploy/api","ttl_ms":60000}`)
	if r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	if r := f.do("PUT", "/v1/kinds/build", "", "application/json", `{}`); r.status != 200 {
		t.Fatalf("PUT /v1/kinds/build: %d %s", r.status, r.raw)
	}
	job := f.post("/v1/jobs", "", `{"kind":"build","resource":"repo/a"}`)
	if job.status != 201 {
		t.Fatalf("submit: %d %s", job.status, job.raw)
	}
	id := job.body["id"].(float64)
	jobPath := "/v1/jobs/" + jsonNumber(id)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/locks", ""},
		{"GET", "/v1/locks/deploy/api", ""},
		{"GET", "/v1/info", ""},
		{"GET", "/metrics", ""},
		{"GET", "/healthz", ""},
		{"GET", "/", ""},
		{"GET", "/ui/app.js", ""},
		{"POST", "/v1/locks/force-release", `{"key":"deploy/api","reason":"rebound"}`},
		{"POST", jobPath + "/cancel", `{}`},
	} {
		for _, host := range []string{"evil.example:7725", "evil.example", "127.0.0.1.evil.example:7725", "localhost.evil.example"} {
			status, code, detail := hostRequest(t, f, c.method, c.path, host, "", c.body, rebinding)
			if status != 403 || code != "forbidden" || !strings.Contains(detail, "Host") || !strings.Contains(detail, "--allowed-host") {
				t.Errorf("%s %s with Host %s: %d %s %q; want 403 forbidden naming the Host rule and --allowed-host", c.method, c.path, host, status, code, detail)
			}
		}
	}
	if r := f.do("GET", "/v1/locks/deploy/api", "", "", ""); r.status != 200 {
		t.Fatalf("the lease did not survive the rebinding page: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", jobPath, "", "", ""); r.status != 200 || r.body["state"] == "cancelled" {
		t.Fatalf("the job did not survive the rebinding page: %d %s", r.status, r.raw)
	}
	// Loopback names, with or without a port, still work; the dashboard's own POST too.
	port := mustPort(t, f.url)
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "127.9.8.7:" + port, "[::1]:" + port, "[::1]",
		"localhost:" + port, "localhost", "LocalHost.:" + port, "app.localhost:" + port} {
		if status, code, detail := hostRequest(t, f, "GET", "/v1/info", host, "", "", nil); status != 200 {
			t.Errorf("GET /v1/info with Host %s: %d %s %s", host, status, code, detail)
		}
	}
	same := map[string]string{"Origin": "http://localhost:" + port, "Sec-Fetch-Site": "same-origin"}
	if status, code, detail := hostRequest(t, f, "POST", jobPath+"/cancel", "localhost:"+port, "", `{}`, same); status != 200 {
		t.Fatalf("the dashboard's cancel from http://localhost:%s: %d %s %s", port, status, code, detail)
	}
}

// newConfigFixture serves a server over a SQLite store with jobs, its config changed by set, with
// no check of the answers against the OpenAPI document (the dashboard's paths are not in it).
func newConfigFixture(t *testing.T, withAuth bool, set func(*server.Config)) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if withAuth {
		a, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken(readToken) +
			"\nwriter write " + server.HashToken(writeToken) + "\nops admin " + server.HashToken(adminToken) + "\n"))
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
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &fixture{t: t, url: ts.URL, store: st}
}

func mustPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// The names a server answers besides loopback ones: its listen address and the allowed hosts.
// With auth, the Host is not checked (a page has no token) unless hosts are allowed.
func TestHostCheckAllowedNames(t *testing.T) {
	f := newConfigFixture(t, false, func(c *server.Config) {
		c.AllowedHosts = []string{"Baton.Internal", "10.0.0.5", "fd00::5"}
		c.ListenAddr = "baton-1.example:7725"
	})
	for host, want := range map[string]int{
		"baton.internal:7725": 200, "BATON.INTERNAL.": 200, "10.0.0.5:80": 200, "[fd00::5]:7725": 200,
		"baton-1.example:7725": 200, "baton-1.example": 200, "localhost:1": 200,
		"evil.example": 403, "internal:7725": 403, "10.0.0.6:7725": 403, "x.baton.internal": 403,
	} {
		if status, code, detail := hostRequest(t, f, "GET", "/v1/locks", host, "", "", nil); status != want {
			t.Errorf("Host %q: %d %s %s; want %d", host, status, code, detail, want)
		}
	}
	// An unspecified listen address names no host.
	f = newConfigFixture(t, false, func(c *server.Config) { c.ListenAddr = "0.0.0.0:7725" })
	if status, _, _ := hostRequest(t, f, "GET", "/v1/locks", "0.0.0.0:7725", "", "", nil); status != 403 {
		t.Errorf("Host 0.0.0.0 with listen address 0.0.0.0: %d, want 403", status)
	}

	withAuth := newConfigFixture(t, true, nil)
	if status, code, detail := hostRequest(t, withAuth, "GET", "/v1/locks", "evil.example:7725", readToken, "", rebinding); status != 200 {
		t.Errorf("with auth and no allowed hosts, Host evil.example: %d %s %s; want 200 (a page has no token)", status, code, detail)
	}
	withAuth = newConfigFixture(t, true, func(c *server.Config) { c.AllowedHosts = []string{"baton.internal"} })
	for host, want := range map[string]int{"baton.internal": 200, "127.0.0.1:1": 200, "evil.example": 403} {
		if status, code, detail := hostRequest(t, withAuth, "GET", "/v1/locks", host, readToken, "", nil); status != want {
			t.Errorf("with auth and allowed hosts, Host %q: %d %s %s; want %d", host, status, code, detail, want)
		}
	}

	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, bad := range []string{"baton.internal:7725", "", "a b", "[::1]:80", "http://x"} {
		_, err := server.New(server.Config{Store: st, AllowedHosts: []string{bad}})
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != "allowed_host" || !strings.Contains(inv.Rule, "without a port") {
			t.Errorf("AllowedHosts %q: %v; want an invalid allowed_host", bad, err)
		}
	}
}
