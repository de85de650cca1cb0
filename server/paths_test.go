package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// coolDown makes resource cool down for an hour: a job of a kind with a resource cooldown ran
// on it.
func (f *fixture) coolDown(resource string) {
	f.t.Helper()
	if r := f.do("PUT", "/v1/kinds/cool", "", "application/json", `{"resource_cooldown_ms":3600000}`); r.status != 200 {
		f.t.Fatalf("put kind: %d %s", r.status, r.raw)
	}
	if r := f.post("/v1/jobs", "", fmt.Sprintf(`{"kind":"cool","resource":%q}`, resource)); r.status != 201 {
		f.t.Fatalf("submit on %q: %d %s", resource, r.status, r.raw)
	}
	c := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["cool"]}`)
	jobs, _ := c.body["jobs"].([]any)
	if c.status != 200 || len(jobs) != 1 {
		f.t.Fatalf("claim: %d %s", c.status, c.raw)
	}
	j := jobs[0].(map[string]any)
	if r := f.post(fmt.Sprintf("/v1/jobs/%.0f/complete", j["id"]), "", fmt.Sprintf(`{"token":%.0f}`, j["token"])); r.status != 200 {
		f.t.Fatalf("complete: %d %s", r.status, r.raw)
	}
}

func (f *fixture) cooling(escapedKey string) bool {
	f.t.Helper()
	r := f.do("GET", "/v1/resources/"+escapedKey, "", "", "")
	if r.status != 200 {
		f.t.Fatalf("GET /v1/resources/%s: %d %s", escapedKey, r.status, r.raw)
	}
	return r.body["cooldown"] != nil
}

// A path the router would clean ("a/../b", "a//b", "a/./b") is refused with a 400 naming the
// path, never redirected to the cleaned path: a client that follows redirects (curl -L, and
// net/http follows a 307 with its body) would otherwise act on another key than the one it
// named, e.g. clear the cooldown of "victim" when it asked for "evil/../victim". Escaped, every
// such key is reachable: %2E for a dot segment, %2F for a slash.
func TestPathsAreNotCleanedIntoOtherKeys(t *testing.T) {
	// Two servers: a key is one resource, so a live lease on it and a cooldown after a job on it
	// cannot both be set up on one store. lf holds the leases, f the resources.
	f, lf := newJobFixture(t, false).fixture, newJobFixture(t, false).fixture
	for _, k := range []string{"victim", "evil/../victim", "a//b", "a/./b", "..", "."} {
		if r := lf.post("/v1/locks/acquire", "", fmt.Sprintf(`{"key":%q,"holder":"h-%s","ttl_ms":60000}`, k, k)); r.status != 200 {
			t.Fatalf("acquire %q: %d %s", k, r.status, r.raw)
		}
	}
	f.coolDown("victim")
	f.coolDown("evil/../victim")

	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/locks/evil/../victim", ""},
		{"GET", "/v1/locks/a//b", ""},
		{"GET", "/v1/locks/a/./b", ""},
		{"GET", "/v1/locks/evil/..", ""},
		{"GET", "/v1//locks", ""},
		{"GET", "/v1/resources/evil/../victim", ""},
		{"POST", "/v1/resources/evil/../victim/clear-cooldown", `{"reason":"attack"}`},
		{"PUT", "/v1/resources/evil/../victim/state", `{"state":"PWNED"}`},
		{"POST", "/v1/jobs/1/../2/cancel", ""},
	} {
		r := f.do(c.method, c.path, "", "application/json", c.body)
		if r.status != http.StatusBadRequest || r.body["field"] != "path" || r.header.Get("Location") != "" ||
			!strings.Contains(r.body["rule"].(string), "%2F") {
			t.Errorf("%s %s: %d %s (Location %q), want 400 naming the path, not a redirect", c.method, c.path, r.status, r.raw, r.header.Get("Location"))
		}
	}
	if !f.cooling("victim") {
		t.Fatal("victim's cooldown was cleared by a request for evil/../victim")
	}
	if r := f.do("GET", "/v1/resources/victim", "", "", ""); r.body["state"] != "" {
		t.Fatalf("victim's state was set by a request for evil/../victim: %s", r.raw)
	}

	// Escaped, each key is its own: as the Go client sends it (%2E) and as the TypeScript and
	// Python clients and the dashboard do (a browser's URL parser removes %2E segments too, so
	// they join a dot segment to its neighbour with %2F).
	for path, key := range map[string]string{
		"/v1/locks/victim":               "victim",
		"/v1/locks/evil/%2E%2E/victim":   "evil/../victim",
		"/v1/locks/evil%2F../victim":     "evil/../victim",
		"/v1/locks/a%2F%2Fb":             "a//b",
		"/v1/locks/a/%2E/b":              "a/./b",
		"/v1/locks/a%2F./b":              "a/./b",
		"/v1/locks/%2E%2E":               "..",
		"/v1/locks/%2E":                  ".",
		"/v1/resources/evil%2F../victim": "evil/../victim",
	} {
		via := f
		if strings.HasPrefix(path, "/v1/locks/") {
			via = lf
		}
		r := via.do("GET", path, "", "", "")
		got := r.body["key"]
		if l, ok := r.body["lease"].(map[string]any); ok {
			got = l["key"]
		}
		if r.status != 200 || got != key {
			t.Errorf("GET %s: %d %s, want %q", path, r.status, r.raw, key)
		}
	}
	if r := f.post("/v1/resources/evil%2F../victim/clear-cooldown", "", `{"reason":"by its escaped path"}`); r.status != 200 || r.body["resource"] != "evil/../victim" {
		t.Fatalf("clear-cooldown of evil/../victim by its escaped path: %d %s", r.status, r.raw)
	}
	if f.cooling("evil%2F../victim") || !f.cooling("victim") {
		t.Fatal("clearing evil/../victim's cooldown did not end it, or ended victim's")
	}
}
