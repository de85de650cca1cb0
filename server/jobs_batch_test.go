package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/batonhq/baton/store"
)

func TestSubmitBatchOverHTTP(t *testing.T) {
	f := newJobFixture(t, true)
	r := f.post("/v1/jobs/batch", writeToken, `{"jobs":[
		{"kind":"build","resource":"repo/a","args":{"n":1}},
		{"kind":"build","resource":"repo/a","idempotency_key":"a2"},
		{"kind":"build","resource":"repo/b","delay_ms":60000},
		{"kind":"build","resource":"repo/c","idempotency_key":"a2"}]}`)
	if r.status != 201 {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
	results, _ := r.body["results"].([]any)
	if len(results) != 4 {
		t.Fatalf("batch results: %s; want 4", r.raw)
	}
	res := func(i int) (map[string]any, bool) {
		m := results[i].(map[string]any)
		return m["job"].(map[string]any), m["existing"].(bool)
	}
	a1, e1 := res(0)
	a2, e2 := res(1)
	b, _ := res(2)
	dup, e4 := res(3)
	if a1["head"] != true || a2["head"] != false || e1 || e2 || b["state"] != "scheduled" || !e4 || dup["id"] != a2["id"] {
		t.Fatalf("batch results: %s; want repo/a's jobs in order, repo/b scheduled, the repeated key returning job %v", r.raw, a2["id"])
	}
	// The same keys alone: nothing new, 200.
	if r := f.post("/v1/jobs/batch", writeToken, `{"jobs":[{"kind":"build","resource":"repo/z","idempotency_key":"a2"}]}`); r.status != 200 {
		t.Fatalf("batch of a known key: %d %s; want 200", r.status, r.raw)
	}
	if r := f.post("/v1/jobs/batch", readToken, `{"jobs":[{"kind":"build","resource":"repo/z"}]}`); r.status != 403 {
		t.Fatalf("batch with a read token: %d %s; want 403", r.status, r.raw)
	}

	jobs, resources := f.counts()
	ok := `{"kind":"build","resource":"repo/new"}`
	for _, c := range []struct {
		name, header, body string
		status             int
		field              string
		index              float64 // -1: none
	}{
		{"no jobs", "", `{"jobs":[]}`, 400, "jobs", -1},
		{"jobs missing", "", `{}`, 400, "jobs", -1},
		{"too many jobs", "", `{"jobs":[` + strings.Repeat(`{},`, store.MaxSubmitMany) + `{}]}`, 400, "jobs", -1},
		{"a null job", "", `{"jobs":[` + ok + `,null]}`, 400, "jobs[1]", 1},
		{"a bad resource", "", `{"jobs":[` + ok + `,` + ok + `,{"kind":"build","resource":""}]}`, 400, "jobs[2].resource", 2},
		{"a bad delay", "", `{"jobs":[{"kind":"build","resource":"r","delay_ms":-5},` + ok + `]}`, 400, "jobs[0].delay_ms", 0},
		{"a bad time", "", `{"jobs":[` + ok + `,{"kind":"build","resource":"r","scheduled_at":"soon"}]}`, 400, "jobs[1].scheduled_at", 1},
		{"an unknown member", "", `{"jobs":[{"kind":"build","resource":"r","resources":"x"}]}`, 400, "jobs[0].resources", 0},
		{"a member of the wrong type", "", `{"jobs":[` + ok + `,{"kind":"build","resource":"r","priority":"high"}]}`, 400, "jobs[1].priority", 1},
		{"a job that is not JSON", "", `{"jobs":[` + ok + `,{"kind":"build",]}`, 400, "jobs[1]", 1},
		{"text that is not Unicode", "", `{"jobs":[` + ok + `,{"kind":"build","resource":"r\ud800"}]}`, 400, "jobs[1].resource", 1},
		{"jobs not an array", "", `{"jobs":{}}`, 400, "jobs", -1},
		{"another member", "", `{"jobs":[` + ok + `],"dry_run":true}`, 400, "dry_run", -1},
		{"not an object", "", `[` + ok + `]`, 400, "body", -1},
		{"trailing data", "", `{"jobs":[` + ok + `]} {}`, 400, "body", -1},
		{"cut short", "", `{"jobs":[` + ok, 400, "", -1},
		{"an unknown kind", "", `{"jobs":[` + ok + `,{"kind":"nope","resource":"r"}]}`, 400, "jobs[1].kind", 1},
		{"the header", "k", `{"jobs":[` + ok + `]}`, 400, "Idempotency-Key", -1},
		{"a refusal in the batch", "", `{"jobs":[` + ok + `,{"kind":"deploy","resource":"repo/new"}]}`, 409, "", 1},
		{"a refusal against a job before", "", `{"jobs":[` + ok + `,{"kind":"deploy","resource":"repo/a"}]}`, 409, "", 1},
	} {
		var req response
		if c.header != "" {
			req = f.doHeader(t, "/v1/jobs/batch", c.header, c.body)
		} else {
			req = f.do("POST", "/v1/jobs/batch", writeToken, "application/json", c.body)
		}
		if req.status != c.status || req.header.Get("Content-Type") != "application/problem+json" ||
			(c.field != "" && req.body["field"] != c.field) {
			t.Errorf("batch with %s: %d %s; want %d on field %q", c.name, req.status, req.raw, c.status, c.field)
			continue
		}
		idx, has := req.body["index"].(float64)
		if (c.index >= 0) != has || has && idx != c.index {
			t.Errorf("batch with %s: index in %s; want %v", c.name, req.raw, c.index)
		}
		if c.status == 409 && (req.body["code"] != "resource_busy" || req.body["resource"] == nil) {
			t.Errorf("batch with %s: %s; want resource_busy naming the resource", c.name, req.raw)
		}
	}
	if j, rs := f.counts(); j != jobs || rs != resources {
		t.Fatalf("after refused batches: %d jobs, %d resources; want %d, %d", j, rs, jobs, resources)
	}
}

// doHeader posts body with an Idempotency-Key header.
func (f *jobFixture) doHeader(t *testing.T, path, key, body string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+writeToken)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}
