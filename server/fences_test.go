package server_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestFenceCheckOverHTTP(t *testing.T) {
	f := newJobFixture(t, true).fixture // a SQLite store, which keeps fences
	check := func(token string, body string) response {
		t.Helper()
		return f.post("/v1/fences/check", token, body)
	}
	if r := check(writeToken, `{"resource":"db/orders","token":7}`); r.status != 200 || r.body["token"] != 7.0 || r.body["resource"] != "db/orders" {
		t.Fatalf("first check: %d %s", r.status, r.raw)
	}
	if r := check(writeToken, `{"resource":"db/orders","token":7}`); r.status != 200 {
		t.Fatalf("the same token again: %d %s", r.status, r.raw)
	}
	r := check(writeToken, `{"resource":"db/orders","token":6}`)
	if r.status != 409 || r.body["code"] != "stale_token" || r.body["token"] != 6.0 || r.body["current_token"] != 7.0 ||
		r.body["resource"] != "db/orders" || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("stale check: %d %s", r.status, r.raw)
	}
	if r := check(readToken, `{"resource":"db/orders","token":8}`); r.status != 403 {
		t.Errorf("a reader's check: %d %s, want 403", r.status, r.raw)
	}
	if r := check("", `{"resource":"db/orders","token":8}`); r.status != 401 {
		t.Errorf("an anonymous check: %d %s, want 401", r.status, r.raw)
	}
	for _, c := range []struct{ body, field string }{
		{`{"token":1}`, "resource"},
		{`{"resource":"r"}`, "token"},
		{`{"resource":"r","token":0}`, "token"},
		{`{"resource":"r","token":9223372036854775808}`, "token"},
		{`{"resource":"a\nb","token":1}`, "resource"},
		{fmt.Sprintf(`{"resource":%q,"token":1}`, strings.Repeat("r", 513)), "resource"},
	} {
		if r := check(writeToken, c.body); r.status != 400 || r.body["field"] != c.field {
			t.Errorf("%.40s: %d %s, want 400 naming %s", c.body, r.status, r.raw, c.field)
		}
	}
	if r := check(writeToken, `{"resource":"r","token":-1}`); r.status != 400 {
		t.Errorf("a negative token: %d %s, want 400", r.status, r.raw)
	}
	// Nothing above moved the fence.
	if r := check(writeToken, `{"resource":"db/orders","token":7}`); r.status != 200 {
		t.Errorf("token 7 after the refusals: %d %s", r.status, r.raw)
	}
}

// The lease-only fixture's store hides the SQLite store's fences: 501.
func TestFenceCheckWithoutFences(t *testing.T) {
	f := newFixture(t, false)
	if r := f.post("/v1/fences/check", "", `{"resource":"r","token":1}`); r.status != 501 || r.body["code"] != "not_implemented" {
		t.Errorf("without fences: %d %s", r.status, r.raw)
	}
}
