package server_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// A store that keeps no audit log answers GET /v1/events with 501 and a problem saying so, not
// with an empty list that reads as "nothing happened".
func TestEventsWithoutAnAuditLog(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server (cleanups run last first)
	f := serveStore(t, st, st, "sqlite-no-audit")
	r := f.do("GET", "/v1/events", "", "", "")
	if r.status != 501 || r.body["code"] != "not_implemented" || !strings.Contains(r.header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("GET /v1/events without audit: %d %s %s", r.status, r.header.Get("Content-Type"), r.raw)
	}
	if d, _ := r.body["detail"].(string); !strings.Contains(d, "sqlite-no-audit") || !strings.Contains(d, "keeps no audit log") {
		t.Errorf("detail %q does not name the store and say it keeps no audit log", d)
	}
	// GET /v1/info says so, for clients (the dashboard) that hide the audit log.
	if r := f.do("GET", "/v1/info", "", "", ""); r.status != 200 || r.body["audit"] != false {
		t.Errorf("GET /v1/info without audit: %d %s", r.status, r.raw)
	}
	// With the audit log on, the same route lists (here: nothing yet).
	g := newFixture(t, false)
	if r := g.do("GET", "/v1/events", "", "", ""); r.status != 200 {
		t.Errorf("GET /v1/events with audit: %d %s", r.status, r.raw)
	}
	if r := g.do("GET", "/v1/info", "", "", ""); r.status != 200 || r.body["audit"] != true {
		t.Errorf("GET /v1/info with audit: %d %s", r.status, r.raw)
	}
}

// TestEventsNewestFirst: order=desc lists the audit log newest first, and its next_cursor pages
// on in that order; order=asc (the default) oldest first; another order is refused, naming it.
func TestEventsNewestFirst(t *testing.T) {
	f := newFixture(t, false)
	for _, key := range []string{"e/1", "e/2", "e/3"} {
		if r := f.do("POST", "/v1/locks/acquire", "", "application/json", `{"key":"`+key+`"}`); r.status != 200 {
			t.Fatalf("acquire %s: %d %s", key, r.status, r.raw)
		}
	}
	keys := func(r response) (out []string) {
		evs, _ := r.body["events"].([]any)
		for _, e := range evs {
			out = append(out, e.(map[string]any)["key"].(string))
		}
		return out
	}
	first := f.do("GET", "/v1/events?order=desc&limit=2", "", "", "")
	cursor, _ := first.body["next_cursor"].(string)
	if first.status != 200 || strings.Join(keys(first), " ") != "e/3 e/2" || cursor == "" {
		t.Fatalf("newest first: %d %s", first.status, first.raw)
	}
	rest := f.do("GET", "/v1/events?order=desc&limit=2&cursor="+cursor, "", "", "")
	if rest.status != 200 || strings.Join(keys(rest), " ") != "e/1" {
		t.Fatalf("newest first, next page: %d %s", rest.status, rest.raw)
	}
	if r := f.do("GET", "/v1/events?order=asc", "", "", ""); r.status != 200 || strings.Join(keys(r), " ") != "e/1 e/2 e/3" {
		t.Fatalf("oldest first: %d %s", r.status, r.raw)
	}
	r := f.do("GET", "/v1/events?order=newest", "", "", "")
	if r.status != 400 || r.body["field"] != "order" {
		t.Fatalf("order=newest: %d %s", r.status, r.raw)
	}
}

// serveStore serves a server over st (named name), validated against the OpenAPI document,
// until the test ends; raw is the SQLite store underneath, for the fixture.
func serveStore(t *testing.T, st store.Store, raw *sqlite.Store, name string) *fixture {
	t.Helper()
	srv, err := server.New(server.Config{Store: st, StoreName: name})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return &fixture{t: t, url: ts.URL, store: raw}
}
