package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// treePath is the path of a tree's prefix: each level escaped, a dot level too (as the Go
// client sends it), the trailing "/" kept.
func treePath(prefix string) string {
	levels := strings.Split(prefix, "/")
	for i, l := range levels {
		switch l {
		case ".":
			levels[i] = "%2E"
		case "..":
			levels[i] = "%2E%2E"
		default:
			levels[i] = url.PathEscape(l)
		}
	}
	return "/v1/trees/" + strings.Join(levels, "/")
}

// Trees through the API: an admin sets and deletes them, readers list and get them, writers and
// readers may not change them; a refusal by a related key names it; a tree in use is a 409
// naming the key and what lives there; the audit log names the admin.
func TestTreesThroughTheAPI(t *testing.T) {
	f := newFixture(t, true)
	put := func(path, token, body string) response {
		ct := ""
		if body != "" {
			ct = "application/json"
		}
		return f.do("PUT", path, token, ct, body)
	}
	for _, tok := range []string{readToken, writeToken} {
		r := put("/v1/trees/cluster/", tok, "")
		if r.status != http.StatusForbidden || r.body["required_role"] != "admin" {
			t.Fatalf("PUT a tree with a %s token: %d %s, want 403 needing admin", tok, r.status, r.raw)
		}
		if r := f.do("DELETE", "/v1/trees/cluster/", tok, "", ""); r.status != http.StatusForbidden {
			t.Fatalf("DELETE a tree with a %s token: %d %s, want 403", tok, r.status, r.raw)
		}
	}
	r := put("/v1/trees/cluster/", adminToken, "")
	tree, _ := r.body["tree"].(map[string]any)
	if r.status != 200 || tree["prefix"] != "cluster/" || tree["root"] != "cluster" || tree["set_at"] == nil {
		t.Fatalf("set a tree: %d %s", r.status, r.raw)
	}
	// Setting it again answers the same tree; a body may name an actor, which auth overrides.
	again := put("/v1/trees/cluster/", adminToken, `{"actor":"mallory"}`)
	if t2, _ := again.body["tree"].(map[string]any); again.status != 200 || t2["set_at"] != tree["set_at"] {
		t.Fatalf("set the tree again: %d %s, want the tree as it was (%v)", again.status, again.raw, tree)
	}
	if r := f.do("GET", "/v1/trees/cluster/", readToken, "", ""); r.status != 200 || r.body["tree"].(map[string]any)["prefix"] != "cluster/" {
		t.Fatalf("get the tree: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/v1/info", readToken, "", ""); r.body["trees"] != true {
		t.Fatalf("info: %s, want trees true", r.raw)
	}

	// A child of a held key is refused naming the related key and its holder.
	if r := f.post("/v1/locks/acquire", writeToken, `{"key":"cluster/eu-1","holder":"upgrade"}`); r.status != 200 {
		t.Fatalf("acquire cluster/eu-1: %d %s", r.status, r.raw)
	}
	r = f.post("/v1/locks/acquire", writeToken, `{"key":"cluster/eu-1/node/a","holder":"remediate"}`)
	if r.status != http.StatusConflict || r.body["code"] != "lock_held" || r.body["key"] != "cluster/eu-1/node/a" ||
		r.body["related"] != "cluster/eu-1" || r.body["holder"] != "upgrade" || !strings.Contains(r.body["detail"].(string), "related") {
		t.Fatalf("a child of a held key: %d %s, want 409 lock_held naming related cluster/eu-1 and its holder", r.status, r.raw)
	}
	// The tree cannot go while a key of it is live.
	r = f.do("DELETE", "/v1/trees/cluster/", adminToken, "", "")
	if r.status != http.StatusConflict || r.body["code"] != "tree_in_use" || r.body["prefix"] != "cluster/" ||
		r.body["key"] != "cluster/eu-1" || r.body["what"] != "lease" {
		t.Fatalf("delete a tree in use: %d %s, want 409 tree_in_use naming cluster/eu-1 and a lease", r.status, r.raw)
	}
	// Nor can a prefix become a tree while a key under it is held.
	if r := f.post("/v1/locks/acquire", writeToken, `{"key":"pool/a","holder":"flat"}`); r.status != 200 {
		t.Fatalf("acquire pool/a: %d %s", r.status, r.raw)
	}
	r = put("/v1/trees/pool/", adminToken, "")
	if r.status != http.StatusConflict || r.body["code"] != "tree_in_use" || r.body["key"] != "pool/a" || r.body["what"] != "lease" {
		t.Fatalf("set a tree in use: %d %s, want 409 tree_in_use naming pool/a", r.status, r.raw)
	}

	// Odd characters round-trip, escaped level by level, dot levels included.
	odd := "sp ace/q?u#e%ry/ü/../.bin/"
	r = put(treePath(odd), adminToken, "")
	if r.status != 200 || r.body["tree"].(map[string]any)["prefix"] != odd {
		t.Fatalf("set %q at %s: %d %s", odd, treePath(odd), r.status, r.raw)
	}
	if r := f.do("GET", treePath(odd), readToken, "", ""); r.status != 200 || r.body["tree"].(map[string]any)["root"] != strings.TrimSuffix(odd, "/") {
		t.Fatalf("get %q: %d %s", odd, r.status, r.raw)
	}

	// The list, page by page.
	r = f.do("GET", "/v1/trees?limit=1", readToken, "", "")
	trees, _ := r.body["trees"].([]any)
	if r.status != 200 || len(trees) != 1 || r.body["next_cursor"] != "cluster/" {
		t.Fatalf("first page: %d %s, want cluster/ and a cursor", r.status, r.raw)
	}
	r = f.do("GET", "/v1/trees?limit=1&cursor="+url.QueryEscape("cluster/"), readToken, "", "")
	trees, _ = r.body["trees"].([]any)
	if r.status != 200 || len(trees) != 1 || trees[0].(map[string]any)["prefix"] != odd {
		t.Fatalf("second page: %d %s, want %q", r.status, r.raw, odd)
	}
	r = f.do("GET", "/v1/trees?cursor="+url.QueryEscape(odd), readToken, "", "")
	if trees, _ = r.body["trees"].([]any); r.status != 200 || len(trees) != 0 || r.body["next_cursor"] != nil {
		t.Fatalf("past the last: %d %s, want an empty page", r.status, r.raw)
	}

	// Deleted once nothing lives under it, by its escaped path; then 404.
	if r := f.do("DELETE", treePath(odd), adminToken, "", ""); r.status != 200 || r.body["prefix"] != odd || r.body["deleted"] != true {
		t.Fatalf("delete %q: %d %s", odd, r.status, r.raw)
	}
	for _, m := range []string{"GET", "DELETE"} {
		r := f.do(m, treePath(odd), adminToken, "", "")
		if r.status != http.StatusNotFound || r.body["code"] != "not_found" || r.body["prefix"] != odd {
			t.Fatalf("%s of a deleted tree: %d %s, want 404 naming its prefix", m, r.status, r.raw)
		}
	}

	// The audit log names the admin, whatever actor the body said.
	r = f.do("GET", "/v1/events?key="+url.QueryEscape("cluster/"), adminToken, "", "")
	evs, _ := r.body["events"].([]any)
	if r.status != 200 || len(evs) != 1 {
		t.Fatalf("events of cluster/: %d %s, want one tree_set", r.status, r.raw)
	}
	if ev := evs[0].(map[string]any); ev["kind"] != store.EventTreeSet || ev["actor"] != "ops" || ev["principal"] != "ops" {
		t.Fatalf("tree_set event: %v, want actor and principal ops", ev)
	}
	r = f.do("GET", "/v1/events?key="+url.QueryEscape(odd), adminToken, "", "")
	if evs, _ := r.body["events"].([]any); len(evs) != 2 || evs[1].(map[string]any)["kind"] != store.EventTreeDelete {
		t.Fatalf("events of %q: %s, want tree_set then tree_delete", odd, r.raw)
	}
}

// Bad input to every tree route: a 400 naming the field and the rule (403 for the server's
// reserved keys, 415 for a body that is not JSON), never a 500, and nothing set.
func TestTreesBadInput(t *testing.T) {
	f := newFixture(t, false)
	if r := f.do("PUT", "/v1/trees/cluster/", "", "application/json", "{}"); r.status != 200 {
		t.Fatalf("set cluster/: %d %s", r.status, r.raw)
	}
	// Paths that the document cannot describe (an empty prefix; a control character, which its
	// check does not match) are sent to a server that does not check its answers against it.
	plain := newFixtureServing(t, false, func(h http.Handler) http.Handler { return h })
	undocumented := func(path string) bool { return path == "/v1/trees/" || strings.Contains(path, "%0A") }
	long := strings.Repeat("k", store.MaxKeyLen) + "/"
	for _, c := range []struct {
		method, path, ct, body string
		status                 int
		field, rule            string
	}{
		{"PUT", "/v1/trees/cluster", "", "", 400, "prefix", `must end with "/"`},
		{"GET", "/v1/trees/cluster", "", "", 400, "prefix", `must end with "/"`},
		{"DELETE", "/v1/trees/cluster", "", "", 400, "prefix", `must end with "/"`},
		{"PUT", "/v1/trees/", "", "", 400, "prefix", "empty"},
		{"GET", "/v1/trees/", "", "", 400, "prefix", "empty"},
		{"PUT", "/v1/trees/%2F", "", "", 400, "prefix", `must not start with "/"`},
		{"PUT", "/v1/trees/a%2F%2F", "", "", 400, "prefix", "empty level"},
		{"PUT", "/v1/trees/a%2F%2Fb/", "", "", 400, "prefix", "empty level"},
		{"PUT", "/v1/trees/a//b/", "", "", 400, "path", "%2F"}, // never cleaned into another prefix
		{"PUT", "/v1/trees/a%0Ab/", "", "", 400, "prefix", "control"},
		{"PUT", "/v1/trees/" + long, "", "", 400, "prefix", "at most"},
		{"PUT", "/v1/trees/cluster/eu/", "", "", 400, "prefix", `overlaps tree "cluster/"`},
		{"PUT", "/v1/trees/clus/", "", "", 200, "", ""}, // no overlap: "cluster/" does not start with "clus/"
		{"PUT", "/v1/trees/x/", "application/json", `{"actor":"` + strings.Repeat("a", store.MaxHolderLen+1) + `"}`, 400, "actor", "at most"},
		{"PUT", "/v1/trees/x/", "application/json", `{"reason":"r"}`, 400, "reason", "not a known field"},
		{"PUT", "/v1/trees/x/", "application/json", `{"actor":`, 400, "", ""},
		{"PUT", "/v1/trees/x/", "text/plain", `{}`, 415, "", ""},
		{"PUT", "/v1/trees/baton/", "", "", 403, "prefix", "must not start with baton/"},
		{"DELETE", "/v1/trees/baton/", "", "", 403, "prefix", "must not start with baton/"},
		{"DELETE", "/v1/trees/cluster/?reason=x", "", "", 400, "reason", "is not a parameter"},
		{"GET", "/v1/trees?limit=0", "", "", 400, "limit", ""},
		{"GET", "/v1/trees?limit=1001", "", "", 400, "limit", ""},
		{"GET", "/v1/trees?limit=x", "", "", 400, "limit", ""},
		{"GET", "/v1/trees?prefix=a/", "", "", 400, "prefix", "is not a parameter"},
		{"GET", "/v1/trees?cursor=" + strings.Repeat("c", store.MaxKeyLen+1), "", "", 400, "cursor", ""},
		{"POST", "/v1/trees/x/", "application/json", `{}`, 405, "", ""},
	} {
		via := f
		if undocumented(c.path) {
			via = plain
		}
		r := via.do(c.method, c.path, "", c.ct, c.body)
		rule, _ := r.body["rule"].(string)
		if r.status != c.status || (c.field != "" && r.body["field"] != c.field) || !strings.Contains(rule, c.rule) {
			t.Errorf("%s %.60s: %d %s; want %d naming %q (%s)", c.method, c.path, r.status, r.raw, c.status, c.field, c.rule)
		}
	}
	r := f.do("GET", "/v1/trees", "", "", "")
	if trees, _ := r.body["trees"].([]any); r.status != 200 || len(trees) != 2 {
		t.Fatalf("trees after the refusals: %d %s, want cluster/ and clus/ alone", r.status, r.raw)
	}
}

// A store without trees: 501 not_implemented naming the store and the feature on every tree
// route, and info says trees false.
func TestTreesUnsupported(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The bare store.Store interface hides the SQLite store's Treer, as a store without trees.
	srv, err := server.New(server.Config{Store: struct{ store.Store }{st}, StoreName: "redis",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
	f := &fixture{t: t, url: ts.URL, srv: srv, store: st}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/trees"}, {"GET", "/v1/trees/t/"}, {"PUT", "/v1/trees/t/"}, {"DELETE", "/v1/trees/t/"},
	} {
		r := f.do(c.method, c.path, "", "", "")
		if r.status != http.StatusNotImplemented || r.body["code"] != "not_implemented" || r.body["store"] != "redis" || r.body["feature"] != "trees" {
			t.Fatalf("%s %s: %d %s, want 501 naming redis and trees", c.method, c.path, r.status, r.raw)
		}
	}
	if r := f.do("GET", "/v1/info", "", "", ""); r.body["trees"] != false {
		t.Fatalf("info: %s, want trees false", r.raw)
	}
}

// A job on a tree key says so (tree), and a lease refused by a job's attempt on a related key
// names it.
func TestTreeJobsSayTheyAreInATree(t *testing.T) {
	f := newFixture(t, false)
	if r := f.do("PUT", "/v1/trees/cluster/", "", "", ""); r.status != 200 {
		t.Fatalf("set cluster/: %d %s", r.status, r.raw)
	}
	if r := f.do("PUT", "/v1/kinds/upgrade", "", "application/json", `{}`); r.status != 200 {
		t.Fatalf("put kind: %d %s", r.status, r.raw)
	}
	for _, res := range []string{"cluster/eu-1", "flat/eu-1"} {
		r := f.post("/v1/jobs", "", fmt.Sprintf(`{"kind":"upgrade","resource":%q}`, res))
		if r.status != 201 || (r.body["tree"] == true) != (res == "cluster/eu-1") {
			t.Fatalf("submit on %s: %d %s, want tree set only in a tree", res, r.status, r.raw)
		}
	}
	c := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["upgrade"],"limit":2}`)
	if jobs, _ := c.body["jobs"].([]any); c.status != 200 || len(jobs) != 2 {
		t.Fatalf("claim: %d %s", c.status, c.raw)
	}
	r := f.post("/v1/locks/acquire", "", `{"key":"cluster/eu-1/node/a","holder":"h"}`)
	if r.status != http.StatusConflict || r.body["related"] != "cluster/eu-1" || !strings.HasPrefix(r.body["holder"].(string), "job:") {
		t.Fatalf("a child of a key a job runs on: %d %s, want 409 naming related cluster/eu-1 and the job", r.status, r.raw)
	}
}
