package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// The OpenAPI document (server/openapi.json) and the server cannot drift: every route is in the
// document and every operation of the document is a route, and every answer the API tests get
// (the fixtures serve through validating) is checked against the document.

var (
	specOnce sync.Once
	spec     *openapi3.T
	specErr  error
)

func loadSpec(t testing.TB) *openapi3.T {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		spec, specErr = loader.LoadFromData(server.OpenAPI)
		if specErr == nil {
			specErr = spec.Validate(context.Background())
		}
		if specErr == nil {
			closeSchemas(spec)
		}
	})
	if specErr != nil {
		t.Fatalf("server/openapi.json: %v", specErr)
	}
	return spec
}

// closeSchemas makes every object schema that lists its properties, and does not say otherwise,
// refuse other members, so that a member the server answers with but the document does not name
// fails the response checks. The document itself leaves answers open, so that clients built from
// it keep working when a later server adds a member; the server's own answers must not run ahead
// of it.
func closeSchemas(doc *openapi3.T) {
	no := false
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
	}
	for _, ref := range doc.Components.Schemas {
		walk(ref)
	}
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadSpec(t)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
}

// specPath turns a mux pattern into the document's path: {key...} is {key}; the resource state
// route is one mux pattern whose handler requires the /state suffix.
func specPath(method, pattern string) string {
	p := strings.ReplaceAll(pattern, "...}", "}")
	if method == http.MethodPut && p == "/v1/resources/{key}" {
		p += "/state"
	}
	if method == http.MethodPost && p == "/v1/resources/{key}" {
		p += "/clear-cooldown"
	}
	return p
}

func TestOpenAPIListsExactlyTheServersRoutes(t *testing.T) {
	doc := loadSpec(t)
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/b.db", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var routes, documented []string
	for _, r := range server.Routes(srv) {
		method, pattern, _ := strings.Cut(r, " ")
		routes = append(routes, method+" "+specPath(method, pattern))
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(routes)
	sort.Strings(documented)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in server/openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("server/openapi.json documents %s, which the server does not serve", d)
		}
	}
	if len(routes) < 30 {
		t.Fatalf("only %d routes listed: %v", len(routes), routes)
	}
}

func TestOpenAPIServed(t *testing.T) {
	f := newFixture(t, true)
	r := f.do("GET", "/v1/openapi.json", "", "", "") // no token: the document is public
	if r.status != 200 || r.raw != string(server.OpenAPI) || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %q, %d bytes", r.status, r.header.Get("Content-Type"), len(r.raw))
	}
}

// specOp is an operation of the document with the pattern that matches request paths.
type specOp struct {
	method, path string
	re           *regexp.Regexp
	literal      int // characters outside parameters: the most literal match wins
	op           *openapi3.Operation
}

var paramRE = regexp.MustCompile(`\{[a-z_]+\}`)

func specOps(doc *openapi3.T) []specOp {
	var ops []specOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			// A key, a resource, a limit's name or a tree's prefix is the rest of the path
			// (slashes included); other parameters are a segment.
			re := "^"
			last := 0
			for _, m := range paramRE.FindAllStringIndex(path, -1) {
				re += regexp.QuoteMeta(path[last:m[0]])
				if p := path[m[0]:m[1]]; p == "{key}" || p == "{resource}" || p == "{prefix}" || path == "/v1/limits/{name}" {
					re += ".+"
				} else {
					re += "[^/]+"
				}
				last = m[1]
			}
			re += regexp.QuoteMeta(path[last:]) + "$"
			ops = append(ops, specOp{method, path, regexp.MustCompile(re),
				len(paramRE.ReplaceAllString(path, "")), op})
		}
	}
	return ops
}

// findOp returns the operation that serves method and path, or nil.
func findOp(ops []specOp, method, path string) *specOp {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	var best *specOp
	for i := range ops {
		o := &ops[i]
		if o.method == method && o.re.MatchString(path) && (best == nil || o.literal > best.literal) {
			best = o
		}
	}
	return best
}

// checkResponse validates one answer against the document.
func checkResponse(doc *openapi3.T, ops []specOp, method, reqPath string, status int, header http.Header, body []byte) error {
	if method == http.MethodHead {
		return nil
	}
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	o := findOp(ops, method, reqPath)
	var resp *openapi3.Response
	what := method + " " + reqPath + " " + strconv.Itoa(status)
	if o == nil {
		// No operation: the answer must be the not-found or wrong-method problem, or the
		// refusal of a path with an empty or dot segment.
		unclean := status == http.StatusBadRequest && path.Clean(reqPath) != strings.TrimSuffix(reqPath, "/")
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed && !unclean {
			return fmt.Errorf("%s: undocumented path answered", what)
		}
		resp = doc.Components.Responses["Problem"].Value
	} else {
		ref := o.op.Responses.Status(status)
		if ref == nil {
			ref = o.op.Responses.Default()
		}
		if ref == nil {
			return fmt.Errorf("%s: status not documented for %s %s", what, o.method, o.path)
		}
		resp = ref.Value
	}
	mt := resp.Content.Get(ct)
	if mt == nil {
		return fmt.Errorf("%s: content type %q not documented", what, ct)
	}
	if mt.Schema == nil || ct == "text/plain" {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%s: body is not JSON: %v", what, err)
	}
	v = plainNumbers(v)
	// kin-openapi's own validator: the document keeps to the keywords that mean the same in
	// OpenAPI 3.0 and 3.1 (one type per schema, no null, minimum/maximum, enum), and it is a
	// hundred times faster than its JSON Schema 2020-12 mode, which would load the API tests.
	if err := mt.Schema.Value.VisitJSON(v); err != nil {
		return fmt.Errorf("%s: answer does not match server/openapi.json: %v\nbody: %.500s", what, err, body)
	}
	return nil
}

// plainNumbers turns json.Numbers into int64 or float64, as the validator expects.
func plainNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plainNumbers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		if n, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return float64(n)
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// validating serves h and checks every answer against the document, failing t on a mismatch.
func validating(t *testing.T, h http.Handler) http.Handler {
	doc := loadSpec(t)
	ops := specOps(doc)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if r.Context().Err() != nil {
			return // the client went away: nobody gets this answer
		}
		if err := checkResponse(doc, ops, r.Method, r.URL.Path, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Errorf("%v", err)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// The checker itself must catch a drift: an answer missing a required member, a member of the
// wrong type or not in the document, an undocumented status or content type.
func TestOpenAPICheckCatchesDrift(t *testing.T) {
	doc := loadSpec(t)
	ops := specOps(doc)
	js := http.Header{"Content-Type": {"application/json"}}
	lease := `{"key":"a","lease_id":"x","holder":"h","token":3,"acquired_at":"2026-01-01T00:00:00Z","expires_at":"2026-01-01T00:00:15Z","ttl_left_ms":15000}`
	if err := checkResponse(doc, ops, "POST", "/v1/locks/acquire", 200, js, []byte(`{"lease":`+lease+`}`)); err != nil {
		t.Fatalf("a good answer was refused: %v", err)
	}
	if err := checkResponse(doc, ops, "GET", "/v1/locks/team/db/acquire", 200, js, []byte(`{"lease":`+lease+`}`)); err != nil {
		t.Fatalf("a key with slashes: %v", err)
	}
	for name, c := range map[string]struct {
		method, path string
		status       int
		ct, body     string
	}{
		"missing token":        {"POST", "/v1/locks/acquire", 200, "application/json", `{"lease":{"key":"a","lease_id":"x","holder":"h","acquired_at":"2026-01-01T00:00:00Z","expires_at":"2026-01-01T00:00:15Z","ttl_left_ms":1}}`},
		"token as a string":    {"POST", "/v1/locks/acquire", 200, "application/json", `{"lease":` + strings.Replace(lease, `"token":3`, `"token":"3"`, 1) + `}`},
		"job state unknown":    {"GET", "/v1/jobs/counts", 200, "application/json", `{"counts":[{"kind":"k","state":"paused","count":1}]}`},
		"problem as json":      {"POST", "/v1/locks/renew", 409, "application/json", `{"type":"t","title":"t","status":409,"code":"not_held"}`},
		"problem without code": {"POST", "/v1/locks/renew", 409, "application/problem+json", `{"type":"t","title":"t","status":409}`},
		"201 for acquire":      {"POST", "/v1/locks/acquire", 201, "application/json", `{"lease":` + lease + `}`},
		"undocumented path":    {"GET", "/v1/nothing", 200, "application/json", `{}`},
		"undocumented member":  {"POST", "/v1/locks/acquire", 200, "application/json", `{"lease":` + strings.Replace(lease, `"token":3`, `"token":3,"shard":2`, 1) + `}`},
	} {
		err := checkResponse(doc, ops, c.method, c.path, c.status, http.Header{"Content-Type": {c.ct}}, []byte(c.body))
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
