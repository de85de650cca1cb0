package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// newFenceFixture serves an audited SQLite store as it is (it keeps fences), with the three
// test tokens, through the validating handler.
func newFenceFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "fences.db"), sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken(readToken) +
		"\nwriter write " + server.HashToken(writeToken) + "\nops admin " + server.HashToken(adminToken) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Auth: a, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &fixture{t: t, url: ts.URL, store: st}
}

// A fence raised by a token no holder had (stored before fences refused unissued tokens) refuses
// every real holder until an admin resets it: DELETE /v1/fences/{resource} needs the admin role
// and a reason, answers the token the fence held, lets the holder pass again, and is in the
// audit log under the admin token's name.
func TestFenceResetOverHTTP(t *testing.T) {
	f := newFenceFixture(t)
	issueTokens(f, writeToken, 3)
	const forged = "9223372036854775807"
	if _, err := f.store.DB().Exec(`INSERT INTO baton_fences (resource, token) VALUES ('db/orders', ` + forged + `)`); err != nil {
		t.Fatal(err)
	}
	check := func(resource, token string) response {
		t.Helper()
		return f.post("/v1/fences/check", writeToken, `{"resource":"`+resource+`","token":`+token+`}`)
	}
	if r := check("db/orders", "3"); r.status != http.StatusConflict {
		t.Fatalf("the holder of token 3 under the forged fence: %d %s, want 409", r.status, r.raw)
	}
	del := func(path, token string) response {
		t.Helper()
		return f.do(http.MethodDelete, path, token, "", "")
	}
	for _, c := range []struct {
		token  string
		status int
	}{{"", 401}, {readToken, 403}, {writeToken, 403}} {
		if r := del("/v1/fences/db/orders?reason=x", c.token); r.status != c.status {
			t.Errorf("reset with token %q: %d %s, want %d", c.token, r.status, r.raw, c.status)
		}
	}
	for _, c := range []struct{ query, field string }{
		{"", "reason"},
		{"?reason=", "reason"},
		{"?reason=x&force=1", "force"},
		{"?reason=" + strings.Repeat("r", 1025), "reason"},
	} {
		if r := del("/v1/fences/db/orders"+c.query, adminToken); r.status != 400 || r.body["field"] != c.field {
			t.Errorf("reset%.30s: %d %s, want 400 naming %s", c.query, r.status, r.raw, c.field)
		}
	}
	if r := check("db/orders", "3"); r.status != http.StatusConflict {
		t.Fatalf("the refused resets deleted the fence: %d %s", r.status, r.raw)
	}

	r := del("/v1/fences/db/orders?reason=forged+token", adminToken)
	if r.status != 200 || r.body["resource"] != "db/orders" || !strings.Contains(r.raw, `"token":`+forged) {
		t.Fatalf("reset: %d %s, want 200 with the forged token", r.status, r.raw)
	}
	if r := check("db/orders", "3"); r.status != 200 {
		t.Fatalf("the holder of token 3 after the reset: %d %s, want 200", r.status, r.raw)
	}
	if r := del("/v1/fences/db/none?reason=x", adminToken); r.status != 404 || r.body["code"] != "not_found" {
		t.Errorf("reset of a resource without a fence: %d %s, want 404 not_found", r.status, r.raw)
	}
	// Resources named like the check route, or with characters escaped in the path.
	for _, c := range []struct{ resource, path string }{{"check", "check"}, {"a b/c", "a%20b/c"}} {
		if r := check(c.resource, "2"); r.status != 200 {
			t.Fatalf("check %q: %d %s", c.resource, r.status, r.raw)
		}
		if r := del("/v1/fences/"+c.path+"?reason=x", adminToken); r.status != 200 || r.body["resource"] != c.resource || r.body["token"] != 2.0 {
			t.Errorf("reset %q: %d %s, want 200 with token 2", c.resource, r.status, r.raw)
		}
	}

	ev := f.do(http.MethodGet, "/v1/events?key=db/orders", adminToken, "", "")
	events, _ := ev.body["events"].([]any)
	if ev.status != 200 || len(events) != 1 {
		t.Fatalf("audit log of db/orders: %d %s, want one event", ev.status, ev.raw)
	}
	e := events[0].(map[string]any)
	if e["kind"] != "fence_reset" || e["actor"] != "ops" || e["reason"] != "forged token" || !strings.Contains(ev.raw, `"token":`+forged) {
		t.Errorf("audit event %v, want fence_reset by ops, reason and the forged token", e)
	}
}
