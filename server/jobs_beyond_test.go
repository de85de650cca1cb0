package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// Jobs beyond one key over HTTP, on the SQLite store: a submit's mode (or shared), extra
// resources and limits, and a kind's mode and limit templates, come back in the job and kind
// objects of every route that shows them.
func TestJobsBeyondOneKeyRoundTrip(t *testing.T) {
	f := newJobFixture(t, true)
	for _, l := range []string{"global", "zone/eu"} {
		if r := f.put("/v1/limits/"+l, adminToken, `{"capacity":2}`); r.status != 200 {
			t.Fatalf("PUT /v1/limits/%s: %d %s", l, r.status, r.raw)
		}
	}
	r := f.put("/v1/kinds/drain", adminToken, `{"mode":"shared","limits":["zone/{args.zone}"]}`)
	if r.status != 200 || r.body["mode"] != "shared" || fmt.Sprint(r.body["limits"]) != "[zone/{args.zone}]" {
		t.Fatalf("PUT /v1/kinds/drain: %d %s", r.status, r.raw)
	}
	r = f.get("/v1/kinds", readToken)
	if r.status != 200 || !strings.Contains(r.raw, `"name":"drain"`) || !strings.Contains(r.raw, `"mode":"shared","limits":["zone/{args.zone}"]`) {
		t.Fatalf("GET /v1/kinds: %d %s", r.status, r.raw)
	}
	// A plain kind's object has neither member, as a plain lease's has no shared.
	if r := f.get("/v1/kinds", readToken); strings.Count(r.raw, `"mode"`) != 1 || strings.Count(r.raw, `"limits"`) != 1 {
		t.Fatalf("GET /v1/kinds: plain kinds show mode or limits: %s", r.raw)
	}

	r = f.post("/v1/jobs", writeToken, `{"kind":"drain","resource":"node/1","args":{"zone":"eu"},"resources":["rack/1","rack/2"],"limits":["global"]}`)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.raw)
	}
	id := jsonNumber(r.body["id"])
	want := `"shared":true,"resources":["rack/1","rack/2"],"limits":["global","zone/eu"]`
	if !strings.Contains(r.raw, want) {
		t.Fatalf("submit: %s; want %s", r.raw, want)
	}
	for _, path := range []string{"/v1/jobs/" + id, "/v1/jobs?resource=node/1"} {
		if r := f.get(path, readToken); r.status != 200 || !strings.Contains(r.raw, want) {
			t.Fatalf("GET %s: %d %s; want %s", path, r.status, r.raw, want)
		}
	}

	// shared is mode shared; mode exclusive overrides the kind's; a plain job shows none of them.
	r = f.post("/v1/jobs/batch", writeToken, `{"jobs":[
		{"kind":"build","resource":"node/2","shared":true,"limits":["global"]},
		{"kind":"drain","resource":"node/3","args":{"zone":"eu"},"mode":"exclusive"},
		{"kind":"build","resource":"node/4","mode":"shared","shared":true},
		{"kind":"build","resource":"node/5"}]}`)
	if r.status != 201 {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
	results := r.body["results"].([]any)
	job := func(i int) map[string]any { return results[i].(map[string]any)["job"].(map[string]any) }
	if job(0)["shared"] != true || fmt.Sprint(job(0)["limits"]) != "[global]" || job(0)["resources"] != nil {
		t.Fatalf("batch job 0: %v", job(0))
	}
	if _, ok := job(1)["shared"]; ok || fmt.Sprint(job(1)["limits"]) != "[zone/eu]" {
		t.Fatalf("batch job 1 (mode exclusive of a shared kind): %v", job(1))
	}
	if job(2)["shared"] != true {
		t.Fatalf("batch job 2: %v", job(2))
	}
	for _, m := range []string{"shared", "resources", "limits"} {
		if _, ok := job(3)[m]; ok {
			t.Fatalf("a plain job shows %s: %v", m, job(3))
		}
	}

	// A claimed attempt holds what the job asks: its job object says so too.
	r = f.post("/v1/jobs/claim", writeToken, `{"worker":"w","kinds":["drain"]}`)
	if jobs, _ := r.body["jobs"].([]any); r.status != 200 || len(jobs) != 1 || !strings.Contains(r.raw, want) {
		t.Fatalf("claim: %d %s; want job %s with %s", r.status, r.raw, id, want)
	}
}

// Bad input beyond one key is a 400 naming the field (jobs[i].field in a batch, kinds[i].field
// in a kinds batch), and writes nothing.
func TestJobsBeyondOneKeyBadInput(t *testing.T) {
	f := newJobFixture(t, true)
	if r := f.put("/v1/limits/global", adminToken, `{"capacity":2}`); r.status != 200 {
		t.Fatalf("PUT /v1/limits/global: %d %s", r.status, r.raw)
	}
	if r := f.put("/v1/kinds/zoned", adminToken, `{"limits":["zone/{args.zone}"]}`); r.status != 200 {
		t.Fatalf("PUT /v1/kinds/zoned: %d %s", r.status, r.raw)
	}
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = fmt.Sprintf(`"r/%d"`, i)
	}
	cases := []struct {
		name, body, field string
	}{
		{"shared with mode exclusive", `"shared":true,"mode":"exclusive"`, "mode"},
		{"unknown mode", `"mode":"both"`, "mode"},
		{"17 resources", `"resources":[` + strings.Join(seventeen, ",") + `]`, "resources"},
		{"a resource twice", `"resources":["a","a"]`, "resources"},
		{"the resource again", `"resources":["repo/x"]`, "resources"},
		{"an empty resource", `"resources":[""]`, "resources"},
		{"a resource with NUL", `"resources":["a\u0000b"]`, "resources"},
		{"a resource not a string", `"resources":[1]`, "resources"},
		{"17 limits", `"limits":[` + strings.Join(seventeen, ",") + `]`, "limits"},
		{"a limit twice", `"limits":["global","global"]`, "limits"},
		{"an empty limit", `"limits":[""]`, "limits"},
		{"a limit with a newline", `"limits":["a\nb"]`, "limits"},
		{"an unknown limit", `"limits":["nope"]`, "limits"},
	}
	for _, c := range cases {
		r := f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"repo/x",`+c.body+`}`)
		if r.status != 400 || r.body["code"] != "invalid_argument" || r.body["field"] != c.field {
			t.Errorf("submit with %s: %d %s; want 400 naming %s", c.name, r.status, r.raw, c.field)
		}
		r = f.post("/v1/jobs/batch", writeToken, `{"jobs":[{"kind":"build","resource":"repo/y"},{"kind":"build","resource":"repo/x",`+c.body+`}]}`)
		if r.status != 400 || r.body["code"] != "invalid_argument" || !strings.HasPrefix(fmt.Sprint(r.body["field"]), "jobs[1]."+c.field) {
			t.Errorf("batch with %s: %d %s; want 400 naming jobs[1].%s", c.name, r.status, r.raw, c.field)
		}
	}
	// A kind's template takes its value from the job's args: a missing one names it.
	for _, args := range []string{``, `,"args":{}`, `,"args":{"zone":["eu"]}`} {
		r := f.post("/v1/jobs", writeToken, `{"kind":"zoned","resource":"repo/x"`+args+`}`)
		if r.status != 400 || r.body["field"] != "args.zone" {
			t.Errorf("submit of a zoned job with args %q: %d %s; want 400 naming args.zone", args, r.status, r.raw)
		}
	}
	// Resources under baton/ are the server's, as the resource is.
	if r := f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"repo/x","resources":["baton/x"]}`); r.status != 403 || r.body["field"] != "resources" {
		t.Errorf("submit with a resource under baton/: %d %s; want 403 naming resources", r.status, r.raw)
	}
	if jobs, resources := f.counts(); jobs != 0 || resources != 0 {
		t.Fatalf("bad submits wrote %d jobs, %d resources", jobs, resources)
	}

	for _, c := range []struct {
		name, body, field string
	}{
		{"unknown mode", `{"mode":"both"}`, "mode"},
		{"a template with a bad part", `{"limits":["zone/{zone}"]}`, "limits"},
		{"a template's argument not a name", `{"limits":["zone/{args.a-b}"]}`, "limits"},
		{"a limit twice", `{"limits":["a","a"]}`, "limits"},
		{"17 limits", `{"limits":[` + strings.Join(seventeen, ",") + `]}`, "limits"},
	} {
		r := f.put("/v1/kinds/bad", adminToken, c.body)
		if r.status != 400 || r.body["field"] != c.field {
			t.Errorf("PUT kind with %s: %d %s; want 400 naming %s", c.name, r.status, r.raw, c.field)
		}
		r = f.post("/v1/kinds", adminToken, `{"kinds":[{"name":"fine"},`+strings.Replace(c.body, "{", `{"name":"bad",`, 1)+`]}`)
		if r.status != 400 || r.body["field"] != "kinds[1]."+c.field {
			t.Errorf("POST kinds with %s: %d %s; want 400 naming kinds[1].%s", c.name, r.status, r.raw, c.field)
		}
	}
	if r := f.get("/v1/kinds", readToken); strings.Contains(r.raw, `"bad"`) || strings.Contains(r.raw, `"fine"`) {
		t.Fatalf("bad kinds were written: %s", r.raw)
	}
}

// On PostgreSQL too, a submit's mode, extra resources and limits and a kind's mode and limit
// templates are kept and come back in the job and kind objects; an unknown limit is a 400 that
// writes nothing; a claimed attempt holds what its job asks.
func TestJobsBeyondOneKeyPostgres(t *testing.T) {
	f, _ := textFixture(t, openPostgres(t))
	put := func(path, body string) response {
		t.Helper()
		r := f.do("PUT", path, "", "application/json", body)
		if r.status != 200 {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.raw)
		}
		return r
	}
	put("/v1/limits/global", `{"capacity":2}`)
	put("/v1/limits/zone%2Feu", `{"capacity":2}`)
	put("/v1/kinds/build", `{}`)
	if r := put("/v1/kinds/drain", `{"mode":"shared","limits":["zone/{args.zone}"]}`); r.body["mode"] != "shared" {
		t.Fatalf("PUT /v1/kinds/drain: %s", r.raw)
	}
	if r := f.do("GET", "/v1/kinds", "", "", ""); !strings.Contains(r.raw, `"mode":"shared","limits":["zone/{args.zone}"]`) {
		t.Fatalf("GET /v1/kinds: %d %s", r.status, r.raw)
	}
	want := `"shared":true,"resources":["rack/1","rack/2"],"limits":["global","zone/eu"]`
	r := f.post("/v1/jobs", "", `{"kind":"drain","resource":"node/1","args":{"zone":"eu"},"resources":["rack/1","rack/2"],"limits":["global"]}`)
	if r.status != 201 || !strings.Contains(r.raw, want) {
		t.Fatalf("submit: %d %s; want %s", r.status, r.raw, want)
	}
	r = f.post("/v1/jobs/batch", "", `{"jobs":[{"kind":"build","resource":"node/2","shared":true,"limits":["global"]},
		{"kind":"build","resource":"node/3"}]}`)
	if r.status != 201 || !strings.Contains(r.raw, `"shared":true`) {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
	for _, path := range []string{"/v1/jobs", "/v1/jobs/batch"} {
		body := `{"kind":"build","resource":"node/9","limits":["nope"]}`
		field := "limits"
		if path == "/v1/jobs/batch" {
			body, field = `{"jobs":[{"kind":"build","resource":"node/8"},`+body+`]}`, "jobs[1].limits"
		}
		if r := f.post(path, "", body); r.status != 400 || r.body["field"] != field {
			t.Errorf("POST %s with an unknown limit: %d %s; want 400 naming %s", path, r.status, r.raw, field)
		}
	}
	for _, res := range []string{"node/8", "node/9"} {
		if r := f.do("GET", "/v1/jobs?resource="+res, "", "", ""); r.status != 200 || !strings.Contains(r.raw, `"jobs":[]`) {
			t.Fatalf("GET /v1/jobs on %s after refused submits: %d %s", res, r.status, r.raw)
		}
	}
	r = f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["drain"]}`)
	if jobs, _ := r.body["jobs"].([]any); r.status != 200 || len(jobs) != 1 || !strings.Contains(r.raw, want) {
		t.Fatalf("claim: %d %s; want the job with %s", r.status, r.raw, want)
	}
}
