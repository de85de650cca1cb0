package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// issueTokens grants and releases a lease n times through the API, so that the store has
// issued fencing tokens up to n: fences refuse tokens the store never issued.
func issueTokens(f *fixture, token string, n int) {
	f.t.Helper()
	for i := 1; i <= n; i++ {
		r := f.post("/v1/locks/acquire", token, `{"key":"fence/issuer","holder":"h","ttl_ms":15000}`)
		if r.status != 200 {
			f.t.Fatalf("acquire: %d %s", r.status, r.raw)
		}
		lease := r.body["lease"].(map[string]any)
		if lease["token"] != float64(i) {
			f.t.Fatalf("grant %d drew token %v, want %d", i, lease["token"], i)
		}
		if r := f.post("/v1/locks/release", token, fmt.Sprintf(`{"key":"fence/issuer","lease_id":%q}`, lease["lease_id"])); r.status != 200 {
			f.t.Fatalf("release: %d %s", r.status, r.raw)
		}
	}
}

func TestFenceCheckOverHTTP(t *testing.T) {
	f := newJobFixture(t, true).fixture // a SQLite store, which keeps fences
	issueTokens(f, writeToken, 8)
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

// A writer cannot poison a fence with a token the store never issued: the check is refused
// naming the field and the rule, and the holder of the greatest issued token still passes.
func TestFenceCheckRefusesUnissuedToken(t *testing.T) {
	f := newJobFixture(t, true).fixture
	issueTokens(f, writeToken, 3)
	for _, token := range []string{"9223372036854775807", "4"} {
		r := f.post("/v1/fences/check", writeToken, `{"resource":"db/orders","token":`+token+`}`)
		if r.status != 400 || r.body["code"] != "invalid_argument" || r.body["field"] != "token" ||
			!strings.Contains(r.body["rule"].(string), "must not exceed the greatest token this store has issued (3") {
			t.Fatalf("token %s, never issued: %d %s; want 400 naming token and the rule", token, r.status, r.raw)
		}
	}
	if r := f.post("/v1/fences/check", writeToken, `{"resource":"db/orders","token":3}`); r.status != 200 || r.body["token"] != 3.0 {
		t.Fatalf("the holder of token 3 after the refusals: %d %s, want 200", r.status, r.raw)
	}
}

// The lease-only fixture's store hides the SQLite store's fences: 501.
func TestFenceCheckWithoutFences(t *testing.T) {
	f := newFixture(t, false)
	if r := f.post("/v1/fences/check", "", `{"resource":"r","token":1}`); r.status != 501 || r.body["code"] != "not_implemented" {
		t.Errorf("without fences: %d %s", r.status, r.raw)
	}
}
