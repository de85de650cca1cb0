package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// The request schemas of server/openapi.json state the server's rules exactly: every bound the
// document declares for a request member (minimum, maximum, minLength, maxLength, enum) is
// sent at the bound, where the server must not refuse it, and just past it, where the server
// must answer 400 naming the member. The cases are generated from the document, so a member
// added to it is covered without a change here; and every integer and string member must
// declare both its bounds (unless listed below with why), so that a missing maximum is a
// failure rather than a case that cannot be generated.

// unbounded lists the request members that declare no bound of their kind, with why.
// Keys: "Schema.member", or "Schema.member[]" for an array's items.
var unbounded = map[string]string{
	"FailRequest.message":        "a handler's error message is cut to 2048 bytes when stored, never refused (the body's 64 KiB bounds it)",
	"SubmitRequest.scheduled_at": "an RFC 3339 time (format date-time): its format is the rule, not its length",
	"Kind.limits[]":              "a limit template's bound is its length once its {args.NAME} parts are filled (512 bytes), not its own",
	"Kind.rate":                  "a rate, MAX/WINDOW (its pattern): its bounds are MAX's and WINDOW's (rate.max, rate.window), not its length",
	"SetLimitRequest.rate":       "a rate, as Kind.rate",
	"SetPrefixRateRequest.rate":  "a rate, as Kind.rate",
	"SubmitRequest.traceparent":  "a W3C traceparent (its pattern): 55 bytes of a fixed form, its pattern is the rule",
}

// notRefused lists boundary cases the server may accept although the document refuses them,
// with why. Keys: "operationId member check".
var notRefused = map[string]string{
	"putKind name below minLength": "the path names the kind: an empty name in the body is the same as none",
}

// notAccepted lists boundary cases the document allows but the server may refuse by a rule of
// the store's state, which the member's description states, with why. Keys: "operationId
// member check".
var notAccepted = map[string]string{
	"checkFence token maximum": "a fence refuses a token greater than the greatest the store has issued (fence poisoning)",
}

// fieldAliases lists the members the server names otherwise in a 400's field, with why.
// Keys and values: "Schema.member" (or "Schema.member[]") and the field's last part.
var fieldAliases = map[string]string{
	"Kind.name":             "kind", // a kind's name is the field kind in every call that names one
	"ClaimRequest.kinds[]":  "kind", // each one is checked as a kind's name
	"CompleteClaim.kinds[]": "kind", // as ClaimRequest's
	"PurgeRequest.ids[]":    "id",   // each one is checked as a job ID
}

// bodyOverrides are request bodies the document's required members do not make valid, with
// why: the boundary cases change one member of them at a time.
var bodyOverrides = map[string]string{
	// A kind's name is optional in PUT /v1/kinds/{name} (the path names it), required here. A
	// debounce applies only to policy replace, so the kinds and submits name that policy.
	"registerKinds": `{"kinds":[{"name":"k","policy":"replace"}]}`,
	"putKind":       `{"policy":"replace"}`,
	// The least key is "k", which resources must not name again.
	"acquireLock": `{"key":"acquire-key"}`,
	"submitJob":   `{"kind":"k","resource":"submit-resource","policy":"replace"}`,
	"submitJobs":  `{"jobs":[{"kind":"k","resource":"submit-resource","policy":"replace"}]}`,
	// The claim's members are checked only with a claim.
	"completeJobs": `{"completions":[{"id":1,"token":1}],"claim":{"worker":"w","kinds":["k"]}}`,
	// A rate is required, and the least string is no rate.
	"setPrefixRate": `{"rate":"1/1s"}`,
}

// specDoc is the document as raw JSON, numbers exact: kin-openapi keeps bounds as float64,
// which cannot hold 2^63-1.
type specDoc map[string]any

func rawSpec(t *testing.T) specDoc {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(server.OpenAPI))
	dec.UseNumber()
	var doc specDoc
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// resolve follows a local $ref; name is the component's name ("" for an inline schema).
func (d specDoc) resolve(s map[string]any) (schema map[string]any, name string) {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s, ""
	}
	name = strings.TrimPrefix(ref, "#/components/schemas/")
	return d["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any), name
}

// member is one member of a request body (or the items of an array member) and where it is.
type member struct {
	schema string // the component schema that declares it
	name   string // its name in that schema ("kinds[]" for an array's items)
	path   []any  // from the body's root: member names and array indexes
	s      map[string]any
}

func (m member) key() string { return m.schema + "." + m.name }

// field is where the member is, as the server names fields: "leases[0].ttl_ms".
func (m member) field() string {
	var b strings.Builder
	for _, p := range m.path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	return b.String()
}

// members lists the members of the object schema s (named name), depth first in name order;
// arrays of objects are entered at index 0.
func (d specDoc) members(s map[string]any, name string, path []any) []member {
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []member
	for _, n := range names {
		p, pname := d.resolve(props[n].(map[string]any))
		at := append(slices.Clone(path), n)
		if pname != "" && p["type"] == "object" {
			out = append(out, d.members(p, pname, at)...)
			continue
		}
		out = append(out, member{schema: name, name: n, path: at, s: p})
		if p["type"] == "array" {
			items, iname := d.resolve(p["items"].(map[string]any))
			at := append(slices.Clone(at), 0)
			if items["type"] == "object" && iname != "" {
				out = append(out, d.members(items, iname, at)...)
			} else {
				out = append(out, member{schema: name, name: n + "[]", path: at, s: items})
			}
		}
	}
	return out
}

// base is a valid value of schema s: its required members at their least values.
func (d specDoc) base(s map[string]any) any {
	s, _ = d.resolve(s)
	if e, ok := s["enum"].([]any); ok {
		return e[0]
	}
	switch s["type"] {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			obj[r.(string)] = d.base(props[r.(string)].(map[string]any))
		}
		return obj
	case "array":
		if n, ok := s["minItems"].(json.Number); ok && n.String() != "0" {
			return []any{d.base(s["items"].(map[string]any))}
		}
		return []any{}
	case "string":
		return strings.Repeat("k", max(1, intOf(s, "minLength", 1)))
	case "integer":
		if n, ok := s["minimum"].(json.Number); ok {
			return n
		}
		return json.Number("1")
	case "boolean":
		return false
	}
	return nil
}

func intOf(s map[string]any, k string, def int) int {
	n, ok := s[k].(json.Number)
	if !ok {
		return def
	}
	i, err := n.Int64()
	if err != nil {
		panic(err)
	}
	return int(i)
}

// plus is n+delta, exactly.
func plus(n json.Number, delta int64) json.Number {
	v, ok := new(big.Int).SetString(n.String(), 10)
	if !ok {
		panic("not an integer bound: " + n)
	}
	return json.Number(v.Add(v, big.NewInt(delta)).String())
}

// boundary is one value sent for a member: allowed by the document (valid) or not.
type boundary struct {
	check string // "maximum", "above maximum", …
	value any
	valid bool
}

func boundaries(s map[string]any) []boundary {
	var out []boundary
	if e, ok := s["enum"].([]any); ok {
		for _, v := range e {
			out = append(out, boundary{fmt.Sprintf("enum %v", v), v, true})
		}
		return append(out, boundary{"not in enum", "not-one-of-the-enum", false})
	}
	switch s["type"] {
	case "integer":
		if n, ok := s["minimum"].(json.Number); ok {
			out = append(out, boundary{"minimum", n, true}, boundary{"below minimum", plus(n, -1), false})
		}
		if n, ok := s["maximum"].(json.Number); ok {
			out = append(out, boundary{"maximum", n, true}, boundary{"above maximum", plus(n, 1), false})
		}
	case "string":
		if _, ok := s["minLength"]; ok {
			n := intOf(s, "minLength", 0)
			out = append(out, boundary{"minLength", strings.Repeat("k", n), true})
			if n > 0 {
				out = append(out, boundary{"below minLength", strings.Repeat("k", n-1), false})
			}
		}
		if _, ok := s["maxLength"]; ok {
			n := intOf(s, "maxLength", 0)
			out = append(out, boundary{"maxLength", strings.Repeat("k", n), true},
				boundary{"above maxLength", strings.Repeat("k", n+1), false})
		}
	}
	return out
}

// set returns a copy of body with the member at path set to v.
func set(body any, path []any, v any) any {
	raw, _ := json.Marshal(body)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		panic(err)
	}
	cur := out
	for i, p := range path {
		last := i == len(path)-1
		switch p := p.(type) {
		case string:
			obj := cur.(map[string]any)
			if last {
				obj[p] = v
			} else if next, ok := obj[p]; ok {
				cur = next
			} else if _, isIndex := path[i+1].(int); isIndex {
				obj[p] = []any{map[string]any{}}
				cur = obj[p]
			} else {
				obj[p] = map[string]any{}
				cur = obj[p]
			}
		case int:
			arr := cur.([]any)
			if last {
				arr[p] = v
			} else {
				cur = arr[p]
			}
		}
	}
	return out
}

// requestOp is an operation of the document with a JSON request body.
type requestOp struct {
	id, method, path string
	params           []any
	schema           map[string]any
	name             string
}

func (d specDoc) requestOps() []requestOp {
	var out []requestOp
	for path, item := range d["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			o, ok := op.(map[string]any)
			if !ok {
				continue
			}
			rb, ok := o["requestBody"].(map[string]any)
			if !ok {
				continue
			}
			mt, ok := rb["content"].(map[string]any)["application/json"].(map[string]any)
			if !ok {
				continue
			}
			s, name := d.resolve(mt["schema"].(map[string]any))
			params, _ := o["parameters"].([]any)
			out = append(out, requestOp{id: o["operationId"].(string), method: strings.ToUpper(method), path: path,
				params: params, schema: s, name: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// url fills the path's parameters: a string is "k", an integer its minimum; a parameter the
// body repeats (PUT /v1/kinds/{name} and its name) takes the body's value.
func (o requestOp) url(body any) string {
	p := o.path
	for _, param := range o.params {
		pm := param.(map[string]any)
		if pm["in"] != "path" {
			continue
		}
		name := pm["name"].(string)
		v := "k"
		if ex, ok := pm["example"].(string); ok { // a value of its own rules, such as a tree's prefix
			v = ex
		}
		if s, _ := pm["schema"].(map[string]any); s["type"] == "integer" {
			v = "1"
			if n, ok := s["minimum"].(json.Number); ok {
				v = n.String()
			}
		}
		if obj, ok := body.(map[string]any); ok {
			if bv, ok := obj[name].(string); ok && bv != "" {
				v = bv
			}
		}
		p = strings.ReplaceAll(p, "{"+name+"}", v)
	}
	return p
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// names reports whether field names member m (indexes aside: the JSON decoder's type errors
// name "leases.ttl_ms" for leases[0].ttl_ms).
func names(field string, m member) bool {
	want := []string{m.field()}
	if alias, ok := fieldAliases[m.key()]; ok {
		f := m.field()
		if strings.HasSuffix(m.name, "[]") {
			f = strings.TrimSuffix(f, "[0]")
		}
		if i := strings.LastIndexByte(f, '.'); i >= 0 {
			want = append(want, f[:i+1]+alias)
		} else {
			want = append(want, alias)
		}
	}
	got := indexRE.ReplaceAllString(field, "")
	for _, w := range want {
		w = indexRE.ReplaceAllString(w, "")
		// An array's items may be named by the array.
		if got == w || (strings.HasSuffix(m.name, "[]") && got == indexRE.ReplaceAllString(strings.TrimSuffix(m.field(), "[0]"), "")) {
			return true
		}
	}
	return false
}

// Every integer and string member of a request body declares both its bounds, and every
// object member without members of its own says it takes any (additionalProperties: true), so
// that types generated from the document can hold it.
func TestOpenAPIRequestMembersDeclareTheirBounds(t *testing.T) {
	doc := rawSpec(t)
	seen := map[string]bool{}
	for _, o := range doc.requestOps() {
		for _, m := range doc.members(o.schema, o.name, nil) {
			if seen[m.key()] {
				continue
			}
			seen[m.key()] = true
			_, exempt := unbounded[m.key()]
			has := func(k string) bool { _, ok := m.s[k]; return ok }
			switch {
			case m.s["type"] == "integer" && !exempt && (!has("minimum") || !has("maximum")):
				t.Errorf("%s (%s %s): an integer without minimum and maximum: %v", m.key(), o.method, o.path, m.s)
			case m.s["type"] == "string" && !exempt && !has("enum") && (!has("minLength") || !has("maxLength")):
				t.Errorf("%s (%s %s): a string without minLength and maxLength: %v", m.key(), o.method, o.path, m.s)
			case m.s["type"] == "object" && m.s["properties"] == nil && m.s["additionalProperties"] != true:
				t.Errorf("%s (%s %s): an object of any members without additionalProperties: true", m.key(), o.method, o.path)
			}
		}
	}
	for k := range unbounded {
		if !seen[k] {
			t.Errorf("unbounded lists %s, which is not a request member", k)
		}
	}
	if len(seen) < 50 {
		t.Fatalf("only %d request members found", len(seen))
	}
}

// The server accepts each request member at every bound the document declares, and refuses it
// just past each with a 400 naming it.
func TestOpenAPIRequestBoundsAreTheServers(t *testing.T) {
	doc := rawSpec(t)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	// A waiting acquire or claim at the longest wait_ms the document allows returns at once.
	srv, err := server.New(server.Config{Store: st, MaxWait: time.Millisecond, StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
	send := func(method, path string, body any) (int, map[string]any) {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(method, ts.URL+path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// Kinds of the shortest and longest names, for submits naming them.
	for _, k := range []string{"k", strings.Repeat("k", 128)} {
		if status, out := send("PUT", "/v1/kinds/"+k, map[string]any{}); status != 200 {
			t.Fatalf("PUT /v1/kinds/%s: %d %v", k, status, out)
		}
	}
	// Limits of the shortest and longest names, for acquires naming them.
	for _, l := range []string{"k", strings.Repeat("k", 512)} {
		if status, out := send("PUT", "/v1/limits/"+l, map[string]any{"capacity": 1000}); status != 200 {
			t.Fatalf("PUT /v1/limits/%s: %d %v", l, status, out)
		}
	}
	cases, used := 0, map[string]bool{}
	for _, o := range doc.requestOps() {
		var base any = doc.base(o.schema)
		if raw, ok := bodyOverrides[o.id]; ok {
			dec := json.NewDecoder(strings.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&base); err != nil {
				t.Fatal(err)
			}
		}
		if status, out := send(o.method, o.url(base), base); status == http.StatusBadRequest || status == http.StatusInternalServerError {
			t.Errorf("%s: the document's least body %v is answered %d %v", o.id, base, status, out)
			continue
		}
		for _, m := range doc.members(o.schema, o.name, nil) {
			for _, b := range boundaries(m.s) {
				name := o.id + " " + m.field() + " " + b.check
				body := set(base, m.path, b.value)
				status, out := send(o.method, o.url(body), body)
				cases++
				field, _ := out["field"].(string)
				switch {
				// 503 is load (a long-poll's last read, say), not the document; 500 is a bug.
				case b.valid && status == http.StatusBadRequest && notAccepted[o.id+" "+m.name+" "+b.check] != "":
					used[o.id+" "+m.name+" "+b.check] = true
				case b.valid && (status == http.StatusBadRequest || status == http.StatusInternalServerError):
					t.Errorf("%s (%.40v): %d %v; the document allows it", name, b.value, status, out)
				case !b.valid && (status != http.StatusBadRequest || !names(field, m)):
					key := o.id + " " + m.name + " " + b.check
					if _, ok := notRefused[key]; ok {
						used[key] = true
						continue
					}
					t.Errorf("%s (%.40v): %d %v; want 400 naming %s", name, b.value, status, out, m.field())
				}
			}
		}
	}
	for k := range notRefused {
		if !used[k] {
			t.Errorf("notRefused lists %q, which the server refuses (or no such case)", k)
		}
	}
	for k := range notAccepted {
		if !used[k] {
			t.Errorf("notAccepted lists %q, which the server accepts (or no such case)", k)
		}
	}
	if cases < 150 {
		t.Fatalf("only %d boundary cases", cases)
	}
	t.Logf("%d boundary cases", cases)
}
