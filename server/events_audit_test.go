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
	// With the audit log on, the same route lists (here: nothing yet).
	g := newFixture(t, false)
	if r := g.do("GET", "/v1/events", "", "", ""); r.status != 200 {
		t.Errorf("GET /v1/events with audit: %d %s", r.status, r.raw)
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
