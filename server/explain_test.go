package server_test

import (
	"fmt"
	"testing"
)

// Both explain endpoints answer with the reasons that hold; bad and unknown IDs get problems.
func TestExplainOverHTTP(t *testing.T) {
	f := newJobFixture(t, true)
	first := job(t, f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"svc/a"}`))["id"].(float64)
	r := f.post("/v1/jobs/claim", writeToken, `{"worker":"w","kinds":["build"],"limit":1,"ttl_ms":60000}`)
	if r.status != 200 {
		t.Fatalf("claim: %d %s", r.status, r.raw)
	}
	second := job(t, f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"svc/a"}`))["id"].(float64)

	r = f.get(fmt.Sprintf("/v1/jobs/%d/explain", int64(second)), readToken)
	reasons, _ := r.body["reasons"].([]any)
	if r.status != 200 || r.body["key"] != "svc/a" || r.body["job"] != second || r.body["job_state"] != "available" || len(reasons) == 0 {
		t.Fatalf("explain job %v: %d %s", second, r.status, r.raw)
	}
	held := reasons[0].(map[string]any)
	if held["code"] != "held" || held["job"] != first || held["holder"] != fmt.Sprintf("job:%d", int64(first)) || held["token"] == nil {
		t.Fatalf("first reason %v; want held by job %v", held, first)
	}

	r = f.get("/v1/resources/svc/a/explain", readToken)
	reasons, _ = r.body["reasons"].([]any)
	if r.status != 200 || r.body["key"] != "svc/a" || len(reasons) != 2 ||
		reasons[0].(map[string]any)["code"] != "held" || reasons[1].(map[string]any)["code"] != "ahead" ||
		reasons[1].(map[string]any)["ahead"] != float64(1) {
		t.Fatalf("explain resource svc/a: %d %s; want held, then 1 ahead (job %v)", r.status, r.raw, second)
	}
	if r := f.get("/v1/resources/svc/free/explain", readToken); r.status != 200 || len(r.body["reasons"].([]any)) != 0 {
		t.Fatalf("explain a free key: %d %s; want no reasons", r.status, r.raw)
	}
	for path, want := range map[string]int{"/v1/jobs/abc/explain": 400, "/v1/jobs/999999/explain": 404, "/v1/resources/%00/explain": 400} {
		if r := f.get(path, readToken); r.status != want || r.body["code"] == nil {
			t.Errorf("GET %s: %d %s; want %d with a problem", path, r.status, r.raw, want)
		}
	}
}
