package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// A replace submit's queued victims count in baton_jobs_total{state="superseded"} when the
// submit supersedes them, through the single and the batch handler; a running job it asks to
// stop counts when its attempt ends superseded (here, its worker's fail).
func TestSupersededJobMetrics(t *testing.T) {
	f := newJobFixture(t, false)
	const superseded = `baton_jobs_total{kind="build",state="superseded"}`
	count := func() string {
		for _, l := range strings.Split(f.get("/metrics", "").raw, "\n") {
			if strings.HasPrefix(l, superseded+" ") {
				return strings.TrimPrefix(l, superseded+" ")
			}
		}
		return "absent"
	}
	submit := func(resource string) map[string]any {
		r := f.post("/v1/jobs", "", fmt.Sprintf(`{"kind":"build","resource":%q,"policy":"replace"}`, resource))
		if r.status != 201 {
			t.Fatalf("submit on %s: %d %s", resource, r.status, r.raw)
		}
		return r.body
	}

	submit("sup/1")
	submit("sup/1")
	if got := count(); got != "1" {
		t.Fatalf("after two replace submits on one resource: %s %s; want 1", superseded, got)
	}

	r := f.post("/v1/jobs/batch", "", `{"jobs":[
		{"kind":"build","resource":"sup/2","policy":"replace"},
		{"kind":"build","resource":"sup/2","policy":"replace"},
		{"kind":"build","resource":"sup/2","policy":"replace"}]}`)
	if r.status != 201 {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
	if got := count(); got != "3" {
		t.Fatalf("after a batch of three replace submits on one resource: %s %s; want 3", superseded, got)
	}

	submit("sup/3")
	jobs := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["build"],"limit":10}`).body["jobs"].([]any)
	var running map[string]any
	for _, j := range jobs {
		if m := j.(map[string]any); m["resource"] == "sup/3" {
			running = m
		}
	}
	if running == nil {
		t.Fatalf("claimed %v; want the job on sup/3 among them", jobs)
	}
	submit("sup/3") // asks the running job to stop: nothing superseded yet
	if got := count(); got != "3" {
		t.Fatalf("after a replace of a running job: %s %s; want 3 (its attempt has not ended)", superseded, got)
	}
	fail := f.post(fmt.Sprintf("/v1/jobs/%d/fail", int64(running["id"].(float64))), "",
		fmt.Sprintf(`{"token":%d}`, int64(running["token"].(float64))))
	if fail.status != 200 || job(t, fail)["state"] != "superseded" {
		t.Fatalf("fail of the replaced running job: %d %s; want 200, superseded", fail.status, fail.raw)
	}
	if got := count(); got != "4" {
		t.Fatalf("after the replaced running job's attempt ended: %s %s; want 4", superseded, got)
	}
}

// A submit skipped because its kind's rate is reached (error code rate_limited) counts in
// baton_jobs_total{state="skipped"}, as the other skips do.
func TestRateLimitedSkipMetrics(t *testing.T) {
	f := newJobFixture(t, false)
	if r := f.do("PUT", "/v1/kinds/rated", "", "application/json", `{"policy":"skip","rate":"1/1h"}`); r.status != 200 && r.status != 201 {
		t.Fatalf("PUT kind: %d %s", r.status, r.raw)
	}
	f.post("/v1/jobs", "", `{"kind":"rated","resource":"rt/1"}`)
	jobs := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["rated"]}`).body["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("claimed %v; want the one job", jobs)
	}
	a := jobs[0].(map[string]any)
	f.post(fmt.Sprintf("/v1/jobs/%d/complete", int64(a["id"].(float64))), "", fmt.Sprintf(`{"token":%d}`, int64(a["token"].(float64))))
	r := f.post("/v1/jobs", "", `{"kind":"rated","resource":"rt/1"}`)
	if errs, _ := r.body["errors"].([]any); r.status != 201 || r.body["state"] != "skipped" || len(errs) != 1 ||
		errs[0].(map[string]any)["code"] != "rate_limited" {
		t.Fatalf("submit over the rate: %d %s; want 201, skipped, rate_limited", r.status, r.raw)
	}
	if m := f.get("/metrics", "").raw; !strings.Contains(m, `baton_jobs_total{kind="rated",state="skipped"} 1`+"\n") {
		t.Fatalf(`no baton_jobs_total{kind="rated",state="skipped"} 1 in /metrics`)
	}
}
