package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// POST /v1/locks/renew-batch renews each held lease, answers each other renewal with the problem
// a single renew would get, and rejects bad input anywhere without renewing anything.
func TestRenewBatch(t *testing.T) {
	f := newFixture(t, true)
	ids := map[string]string{}
	for _, k := range []string{"rb/a", "rb/b"} {
		r := f.post("/v1/locks/acquire", writeToken, `{"key":"`+k+`","holder":"h","ttl_ms":5000}`)
		if r.status != http.StatusOK {
			t.Fatalf("acquire %s: %d %s", k, r.status, r.raw)
		}
		ids[k] = r.body["lease"].(map[string]any)["lease_id"].(string)
	}
	body := fmt.Sprintf(`{"leases":[{"key":"rb/a","lease_id":%q,"ttl_ms":30000},{"key":"rb/b","lease_id":"other"},{"key":"rb/b","lease_id":%q,"ttl_ms":30000}]}`, ids["rb/a"], ids["rb/b"])

	if r := f.post("/v1/locks/renew-batch", readToken, body); r.status != http.StatusForbidden {
		t.Fatalf("renew-batch with a read token: %d %s", r.status, r.raw)
	}
	r := f.post("/v1/locks/renew-batch", writeToken, body)
	if r.status != http.StatusOK {
		t.Fatalf("renew-batch: %d %s", r.status, r.raw)
	}
	results, _ := r.body["results"].([]any)
	if len(results) != 3 {
		t.Fatalf("results: %s", r.raw)
	}
	for i, want := range []string{"rb/a", "", "rb/b"} {
		res := results[i].(map[string]any)
		if want == "" {
			p, _ := res["error"].(map[string]any)
			if p == nil || p["code"] != "not_held" || res["lease"] != nil {
				t.Errorf("result %d: %v; want a not_held problem", i, res)
			}
			continue
		}
		l, _ := res["lease"].(map[string]any)
		if l == nil || l["key"] != want || l["lease_id"] != ids[want] || l["ttl_left_ms"].(float64) <= 5000 {
			t.Errorf("result %d: %v; want %s renewed to 30 s", i, res, want)
		}
	}

	// Bad input: a 400 naming the renewal and the rule, and nothing renewed.
	before := f.do(http.MethodGet, "/v1/locks/rb/a", readToken, "", "")
	for _, c := range []struct{ body, field string }{
		{fmt.Sprintf(`{"leases":[{"key":"rb/a","lease_id":%q,"ttl_ms":60000},{"key":"rb/b","lease_id":"x","ttl_ms":1}]}`, ids["rb/a"]), "leases[1].ttl_ms"},
		{fmt.Sprintf(`{"leases":[{"key":"rb/a","lease_id":%q,"ttl_ms":60000},{"key":"","lease_id":"x"}]}`, ids["rb/a"]), "leases[1].key"},
		{`{"leases":[]}`, "leases"},
		{`{"leases":[` + strings.Repeat(`{"key":"k","lease_id":"x"},`, 1000) + `{"key":"k","lease_id":"x"}]}`, "leases"},
	} {
		r := f.post("/v1/locks/renew-batch", writeToken, c.body)
		if r.status != http.StatusBadRequest || r.body["field"] != c.field {
			t.Errorf("bad batch (%s): %d %s", c.field, r.status, r.raw[:min(len(r.raw), 300)])
		}
	}
	after := f.do(http.MethodGet, "/v1/locks/rb/a", readToken, "", "")
	if before.body["lease"].(map[string]any)["expires_at"] != after.body["lease"].(map[string]any)["expires_at"] {
		t.Errorf("a rejected batch renewed rb/a: %v -> %v", before.body["lease"], after.body["lease"])
	}
}
