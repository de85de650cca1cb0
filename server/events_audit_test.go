package server_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// A store that keeps no audit log answers GET /v1/events with 501 and a problem saying so, not
// with an empty list that reads as "nothing happened".
func TestEventsWithoutAnAuditLog(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, StoreName: "sqlite-no-audit"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(validating(t, srv.Handler()))
	defer ts.Close()
	f := &fixture{t: t, url: ts.URL, store: st}
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
