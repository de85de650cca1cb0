package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// send makes a request with extra headers and returns its status.
func send(t *testing.T, method, url, body string, hdr map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// dashboardFixture is newFixture without the OpenAPI check: the dashboard's page and assets
// are not part of the API's document.
func dashboardFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureServing(t, true, func(h http.Handler) http.Handler { return h })
}

// TestDashboardAssets: the page and its assets are served without a token, with a strict
// content security policy and validators; other unknown paths stay problem documents.
func TestDashboardAssets(t *testing.T) {
	f := dashboardFixture(t)
	page := f.do("GET", "/", "", "", "")
	if page.status != 200 || !strings.Contains(page.header.Get("Content-Type"), "text/html") || !strings.Contains(page.raw, `src="ui/app.js"`) {
		t.Fatalf("GET /: %d %s %.200s", page.status, page.header.Get("Content-Type"), page.raw)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("GET /: Content-Security-Policy %q", csp)
	}
	js := f.do("GET", "/ui/app.js", "", "", "")
	if js.status != 200 || !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") || js.header.Get("ETag") == "" {
		t.Fatalf("GET /ui/app.js: %d %v", js.status, js.header)
	}
	if st := send(t, "GET", f.url+"/ui/app.js", "", map[string]string{"If-None-Match": js.header.Get("ETag")}); st != http.StatusNotModified {
		t.Fatalf("GET /ui/app.js with its ETag: %d, want 304", st)
	}
	for _, p := range []string{"/ui/nope.js", "/nope", "/ui/", "/v1/nope"} {
		if r := f.do("GET", p, "", "", ""); r.status != 404 || r.body["code"] != "no_such_route" {
			t.Errorf("GET %s: %d %v, want a 404 problem", p, r.status, r.body)
		}
	}
	if r := f.do("POST", "/", "", "application/json", "{}"); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}

// TestInfoNamesTheCaller: the dashboard reads the token's role from GET /v1/info.
func TestInfoNamesTheCaller(t *testing.T) {
	f := newFixture(t, true)
	for token, want := range map[string][2]string{readToken: {"reader", "read"}, writeToken: {"writer", "write"}, adminToken: {"ops", "admin"}} {
		r := f.do("GET", "/v1/info", token, "", "")
		if r.status != 200 || r.body["principal"] != want[0] || r.body["role"] != want[1] || r.body["auth"] != true {
			t.Errorf("info with the %s token: %d %v", want[1], r.status, r.body)
		}
	}
	open := newFixture(t, false)
	if r := open.do("GET", "/v1/info", "", "", ""); r.body["role"] != "admin" || r.body["auth"] != false {
		t.Errorf("info without auth: %v", r.body)
	}
}

// TestCrossOriginWritesRefused: a browser request from another site's page cannot change
// state, even on a server without auth (where every caller is admin); reads and clients that
// are not browsers are unaffected.
func TestCrossOriginWritesRefused(t *testing.T) {
	f := newFixture(t, false)
	acquire := func(hdr map[string]string) int {
		return send(t, "POST", f.url+"/v1/locks/acquire", `{"key":"csrf"}`, hdr)
	}
	for _, hdr := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "http://evil.example"}} {
		if s := acquire(hdr); s != http.StatusForbidden {
			t.Errorf("acquire with %v: %d, want 403", hdr, s)
		}
	}
	if n := f.leaseCount(); n != 0 {
		t.Fatalf("%d leases after refused cross-origin acquires", n)
	}
	if s := acquire(map[string]string{"Sec-Fetch-Site": "same-origin"}); s != http.StatusOK {
		t.Errorf("same-origin acquire: %d", s)
	}
	if st := send(t, "GET", f.url+"/v1/locks", "", map[string]string{"Sec-Fetch-Site": "cross-site"}); st != http.StatusOK {
		t.Errorf("cross-site GET: %d", st)
	}
}
