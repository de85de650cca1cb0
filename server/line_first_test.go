package server_test

import (
	"net/http"
	"testing"
)

// A break-glass request (first) needs the admin role: a writer is refused naming the role, and
// nothing joins the line; an admin's request goes before an earlier writer's.
func TestFirstNeedsAdmin(t *testing.T) {
	f := newJobFixture(t, true)
	if r := f.post("/v1/locks/acquire", writeToken, `{"key":"bg/k","holder":"holder","ttl_ms":60000}`); r.status != http.StatusOK {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	r := f.post("/v1/locks/acquire", writeToken, `{"key":"bg/k","holder":"w","ttl_ms":60000,"first":true,"first_reason":"prod down"}`)
	if r.status != http.StatusForbidden || r.body["required_role"] != "admin" {
		t.Fatalf("first as a writer: %d %s; want 403 naming the admin role", r.status, r.raw)
	}
	if r := f.post("/v1/locks/acquire", adminToken, `{"key":"bg/k","holder":"ops","ttl_ms":60000,"first":true}`); r.status != http.StatusBadRequest || r.body["field"] != "first_reason" {
		t.Fatalf("first without a reason: %d %s; want 400 naming first_reason", r.status, r.raw)
	}
	// A writer's waiting request, then an admin's break-glass one: the admin's is first.
	if r := f.post("/v1/locks/acquire", writeToken, `{"key":"bg/k","holder":"plain","lease_id":"plain-1","ttl_ms":60000,"wait_ms":150}`); r.status != http.StatusConflict {
		t.Fatalf("waiting acquire of a held key: %d %s", r.status, r.raw)
	}
	if r := f.post("/v1/locks/acquire", adminToken, `{"key":"bg/k","holder":"ops","lease_id":"bg-1","ttl_ms":60000,"wait_ms":150,"first":true,"first_reason":"prod down"}`); r.status != http.StatusConflict {
		t.Fatalf("break-glass acquire of a held key: %d %s", r.status, r.raw)
	}
	r = f.get("/v1/resources/bg/k", adminToken)
	line, _ := r.body["line"].([]any)
	if r.status != http.StatusOK || len(line) != 2 || line[0].(map[string]any)["holder"] != "ops" ||
		line[0].(map[string]any)["first"] != true || line[1].(map[string]any)["holder"] != "plain" {
		t.Fatalf("the line: %d %s; want ops (first), then plain", r.status, r.raw)
	}
}
