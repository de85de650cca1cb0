package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// claimSignal is the SQLite store with a signal: emptyClaim is closed when a claim first finds
// nothing, so that a test knows a waiting claim request is waiting.
type claimSignal struct {
	*sqlite.Store
	once       sync.Once
	emptyClaim chan struct{}
}

func (c *claimSignal) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	jobs, err := c.Store.ClaimJobs(ctx, p)
	if err == nil && len(jobs) == 0 {
		c.once.Do(func() { close(c.emptyClaim) })
	}
	return jobs, err
}

type jobFixture struct {
	*fixture
	srv        *server.Server
	jobs       *claimSignal
	emptyClaim <-chan struct{}
}

// newJobFixture serves a real SQLite job store, with the three test tokens if withAuth, and the
// kinds "build" (queue) and "deploy" (reject, 2 attempts) registered.
func newJobFixture(t *testing.T, withAuth bool) *jobFixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cs := &claimSignal{Store: st, emptyClaim: make(chan struct{})}
	cfg := server.Config{Store: cs, MaxWait: 20 * time.Second, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if withAuth {
		a, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken(readToken) +
			"\nwriter write " + server.HashToken(writeToken) + "\nops admin " + server.HashToken(adminToken) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = a
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	f := &jobFixture{fixture: &fixture{t: t, url: ts.URL, store: st}, srv: srv, jobs: cs, emptyClaim: cs.emptyClaim}
	for _, k := range []struct{ name, body string }{{"build", `{"name":"build"}`}, {"deploy", `{"policy":"reject","max_attempts":2}`}} {
		if r := f.put("/v1/kinds/"+k.name, adminToken, k.body); r.status != 200 {
			t.Fatalf("PUT /v1/kinds/%s: %d %s", k.name, r.status, r.raw)
		}
	}
	return f
}

func (f *jobFixture) put(path, token, body string) response {
	return f.do(http.MethodPut, path, token, "application/json", body)
}

func (f *jobFixture) get(path, token string) response {
	return f.do(http.MethodGet, path, token, "", "")
}

// job returns an answer that is a job object.
func job(t *testing.T, r response) map[string]any {
	t.Helper()
	if _, ok := r.body["id"].(float64); !ok || r.body["kind"] == nil {
		t.Fatalf("no job in %d %s", r.status, r.raw)
	}
	return r.body
}

func (f *jobFixture) counts() (jobs, resources int) {
	f.t.Helper()
	for q, n := range map[string]*int{`SELECT count(*) FROM jobs`: &jobs, `SELECT count(*) FROM resources`: &resources} {
		if err := f.store.DB().QueryRow(q).Scan(n); err != nil {
			f.t.Fatal(err)
		}
	}
	return jobs, resources
}

func TestBadSubmitsGetProblemsAndWriteNothing(t *testing.T) {
	f := newJobFixture(t, true)
	cases := []struct {
		name, header, body, field string
	}{
		{"unknown kind", "", `{"kind":"nope","resource":"r"}`, "kind"},
		{"malformed kind", "", `{"kind":"no spaces","resource":"r"}`, "kind"},
		{"missing kind", "", `{"resource":"r"}`, "kind"},
		{"args not an object", "", `{"kind":"build","resource":"r","args":[1,2]}`, "args"},
		{"args a string", "", `{"kind":"build","resource":"r","args":"{}"}`, "args"},
		{"args not JSON", "", `{"kind":"build","resource":"r","args":{a:1}}`, "args"},
		{"args cut short", "", `{"kind":"build","resource":"r","args":{"a":`, "body"},
		{"args too long", "", `{"kind":"build","resource":"r","args":{"a":"` + strings.Repeat("x", store.MaxArgsLen) + `"}}`, "args"},
		{"empty resource", "", `{"kind":"build","resource":""}`, "resource"},
		{"missing resource", "", `{"kind":"build"}`, "resource"},
		{"control character in resource", "", `{"kind":"build","resource":"r\u0001x"}`, "resource"},
		{"resource too long", "", `{"kind":"build","resource":"` + strings.Repeat("r", store.MaxKeyLen+1) + `"}`, "resource"},
		{"negative max_attempts", "", `{"kind":"build","resource":"r","max_attempts":-1}`, "max_attempts"},
		{"huge max_attempts", "", `{"kind":"build","resource":"r","max_attempts":1e30}`, "max_attempts"},
		{"priority out of range", "", `{"kind":"build","resource":"r","priority":10}`, "priority"},
		{"unknown policy", "", `{"kind":"build","resource":"r","policy":"sometimes"}`, "policy"},
		{"unknown field", "", `{"kind":"build","resource":"r","queue":"fast"}`, "queue"},
		{"wrong type", "", `{"kind":"build","resource":"r","priority":"high"}`, "priority"},
		{"kind not a string", "", `{"kind":7,"resource":"r"}`, "kind"},
		{"negative delay", "", `{"kind":"build","resource":"r","delay_ms":-5}`, "delay_ms"},
		{"huge delay", "", `{"kind":"build","resource":"r","delay_ms":9223372036854775807}`, "delay_ms"},
		{"scheduled_at not a time", "", `{"kind":"build","resource":"r","scheduled_at":"tomorrow"}`, "scheduled_at"},
		{"scheduled_at and delay", "", `{"kind":"build","resource":"r","scheduled_at":"2030-01-01T00:00:00Z","delay_ms":5}`, "scheduled_at"},
		{"idempotency keys differ", "key-a", `{"kind":"build","resource":"r","idempotency_key":"key-b"}`, "idempotency_key"},
		{"control character in body key", "", `{"kind":"build","resource":"r","idempotency_key":"k\n"}`, "idempotency_key"},
		{"malformed JSON", "", `{"kind":`, "body"},
		{"not an object", "", `[]`, "body"},
		{"trailing data", "", `{"kind":"build","resource":"r"} {}`, "body"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/v1/jobs", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+writeToken)
		if c.header != "" {
			req.Header.Set("Idempotency-Key", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p map[string]any
		_ = json.Unmarshal(raw, &p)
		if resp.StatusCode != 400 || p["code"] != "invalid_argument" || p["field"] != c.field || p["rule"] == "" ||
			resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s; want 400 invalid_argument on field %s", c.name, resp.StatusCode, raw, c.field)
		}
	}
	if jobs, resources := f.counts(); jobs != 0 || resources != 0 {
		t.Fatalf("bad submits wrote %d jobs and %d resources", jobs, resources)
	}
	// Wrong content type and a huge body are refused before anything is read.
	if r := f.do(http.MethodPost, "/v1/jobs", writeToken, "text/plain", `{"kind":"build","resource":"r"}`); r.status != 415 {
		t.Fatalf("text/plain submit: %d %s", r.status, r.raw)
	}
	if r := f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"r","args":{"a":"`+strings.Repeat("x", server.MaxBodyBytes)+`"}}`); r.status != 413 {
		t.Fatalf("huge submit: %d %s", r.status, r.raw)
	}
	// Other bad requests on job routes.
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		code, field                     string
	}{
		{"job ID not a number", "GET", "/v1/jobs/abc", readToken, "", 400, "invalid_argument", "id"},
		{"job ID zero", "POST", "/v1/jobs/0/cancel", writeToken, "", 400, "invalid_argument", "id"},
		{"unknown job", "GET", "/v1/jobs/999", readToken, "", 404, "not_found", ""},
		{"cancel of an unknown job", "POST", "/v1/jobs/999/cancel", writeToken, "", 404, "not_found", ""},
		{"bad state filter", "GET", "/v1/jobs?state=done", readToken, "", 400, "invalid_argument", "state"},
		{"bad after", "GET", "/v1/jobs?after=x", readToken, "", 400, "invalid_argument", "after"},
		{"bad limit", "GET", "/v1/jobs?limit=0", readToken, "", 400, "invalid_argument", "limit"},
		{"claim without kinds", "POST", "/v1/jobs/claim", writeToken, `{"worker":"w"}`, 400, "invalid_argument", "kinds"},
		{"claim without worker", "POST", "/v1/jobs/claim", writeToken, `{"kinds":["build"]}`, 400, "invalid_argument", "worker"},
		{"claim with a short TTL", "POST", "/v1/jobs/claim", writeToken, `{"worker":"w","kinds":["build"],"ttl_ms":5}`, 400, "invalid_argument", "ttl_ms"},
		{"claim with a negative wait", "POST", "/v1/jobs/claim", writeToken, `{"worker":"w","kinds":["build"],"wait_ms":-1}`, 400, "invalid_argument", "wait_ms"},
		{"claim above the limit", "POST", "/v1/jobs/claim", writeToken, `{"worker":"w","kinds":["build"],"limit":101}`, 400, "invalid_argument", "limit"},
		{"heartbeat without token", "POST", "/v1/jobs/1/heartbeat", writeToken, `{}`, 400, "invalid_argument", "token"},
		{"negative token", "POST", "/v1/jobs/1/complete", writeToken, `{"token":-1}`, 400, "invalid_argument", "token"},
		{"fail with a bad code", "POST", "/v1/jobs/1/fail", writeToken, `{"token":1,"code":"not a code"}`, 400, "invalid_argument", "code"},
		{"fail with a negative backoff", "POST", "/v1/jobs/1/fail", writeToken, `{"token":1,"retry_after_ms":-1}`, 400, "invalid_argument", "retry_after_ms"},
		{"cancel with a body field", "POST", "/v1/jobs/1/cancel", writeToken, `{"force":true}`, 400, "invalid_argument", "force"},
		{"purge of ID -1", "POST", "/v1/dlq/purge", adminToken, `{"ids":[-1]}`, 400, "invalid_argument", "id"},
		{"kind with a bad policy", "PUT", "/v1/kinds/x", adminToken, `{"policy":"never"}`, 400, "invalid_argument", "policy"},
		{"kind with a negative timeout", "PUT", "/v1/kinds/x", adminToken, `{"timeout_ms":-1}`, 400, "invalid_argument", "timeout_ms"},
		{"kind with a huge cooldown", "PUT", "/v1/kinds/x", adminToken, `{"cooldown_ms":9223372036854775807}`, 400, "invalid_argument", "cooldown_ms"},
		{"kind with a rate of 0", "PUT", "/v1/kinds/x", adminToken, `{"rate":"0/1h"}`, 400, "invalid_argument", "rate.max"},
		{"kind with a rate over the max", "PUT", "/v1/kinds/x", adminToken, `{"rate":"1000001/1h"}`, 400, "invalid_argument", "rate.max"},
		{"kind with a rate window under 1s", "PUT", "/v1/kinds/x", adminToken, `{"rate":"3/999ms"}`, 400, "invalid_argument", "rate.window"},
		{"kind with a rate window over 30 days", "PUT", "/v1/kinds/x", adminToken, `{"rate":"3/31d"}`, 400, "invalid_argument", "rate.window"},
		{"kind with a rate without a window", "PUT", "/v1/kinds/x", adminToken, `{"rate":"3"}`, 400, "invalid_argument", "rate"},
		{"kinds with a bad rate", "POST", "/v1/kinds", adminToken, `{"kinds":[{"name":"x","rate":"3/1y"}]}`, 400, "invalid_argument", "kinds[0].rate.window"},
		{"limit with a rate of 0", "PUT", "/v1/limits/x", adminToken, `{"capacity":1,"rate":"0/1m"}`, 400, "invalid_argument", "rate.max"},
		{"limit with a rate window under 1s", "PUT", "/v1/limits/x", adminToken, `{"capacity":1,"rate":"3/999ms"}`, 400, "invalid_argument", "rate.window"},
		{"prefix rate of 0", "PUT", "/v1/rates/cluster/", adminToken, `{"rate":"0/1m"}`, 400, "invalid_argument", "rate.max"},
		{"prefix rate over the max", "PUT", "/v1/rates/cluster/", adminToken, `{"rate":"1000001/1m"}`, 400, "invalid_argument", "rate.max"},
		{"prefix rate window over 30 days", "PUT", "/v1/rates/cluster/", adminToken, `{"rate":"3/31d"}`, 400, "invalid_argument", "rate.window"},
		{"prefix rate without a rate", "PUT", "/v1/rates/cluster/", adminToken, `{}`, 400, "invalid_argument", "rate"},
		{"prefix rate by a writer", "PUT", "/v1/rates/cluster/", writeToken, `{"rate":"3/1m"}`, 403, "forbidden", ""},
		{"unknown prefix rate", "GET", "/v1/rates/none/", readToken, "", 404, "not_found", ""},
		{"deletion of an unknown prefix rate", "DELETE", "/v1/rates/none/", adminToken, "", 404, "not_found", ""},
		{"kind named twice differently", "PUT", "/v1/kinds/x", adminToken, `{"name":"y"}`, 400, "invalid_argument", "name"},
		{"kind with a bad name", "PUT", "/v1/kinds/a%20b", adminToken, `{}`, 400, "invalid_argument", "kind"},
		{"kinds batch with a bad one", "POST", "/v1/kinds", adminToken, `{"kinds":[{"name":"ok"},{"name":"bad","max_attempts":-1}]}`, 400, "invalid_argument", "kinds[1].max_attempts"},
		{"empty state", "PUT", "/v1/resources/r/state", adminToken, `{"state":""}`, 400, "invalid_argument", "state"},
		{"state not a string", "PUT", "/v1/resources/r/state", adminToken, `{"state":1}`, 400, "invalid_argument", "state"},
		{"state without the /state suffix", "PUT", "/v1/resources/r", adminToken, `{"state":"S"}`, 404, "not_found", ""},
		{"clear-cooldown without the suffix", "POST", "/v1/resources/r", adminToken, `{"reason":"x"}`, 404, "not_found", ""},
		{"clear-cooldown without a reason", "POST", "/v1/resources/r/clear-cooldown", adminToken, `{}`, 400, "invalid_argument", "reason"},
		{"clear-cooldown by a writer", "POST", "/v1/resources/r/clear-cooldown", writeToken, `{"reason":"x"}`, 403, "forbidden", ""},
		{"clear-cooldown of a resource not cooling down", "POST", "/v1/resources/r/clear-cooldown", adminToken, `{"reason":"x"}`, 404, "not_found", ""},
		{"resource wrong method", "DELETE", "/v1/resources/r", adminToken, ``, 405, "method_not_allowed", ""},
		{"unknown resource", "GET", "/v1/resources/none", readToken, "", 404, "not_found", ""},
		{"bad resource limit", "GET", "/v1/resources?limit=-2", readToken, "", 400, "invalid_argument", "limit"},
	} {
		r := f.do(c.method, c.path, c.token, "application/json", c.body)
		if r.status != c.status || r.body["code"] != c.code || (c.field != "" && r.body["field"] != c.field) {
			t.Errorf("%s: %d %s; want %d %s field %q", c.name, r.status, r.raw, c.status, c.code, c.field)
		}
	}
	if r := f.do("DELETE", "/v1/resources/r", adminToken, "application/json", ``); r.header.Get("Allow") != "GET, PUT, POST" {
		t.Errorf("Allow on a resource = %q; want GET, PUT, POST", r.header.Get("Allow"))
	}
	if jobs, resources := f.counts(); jobs != 0 || resources != 0 {
		t.Fatalf("bad requests wrote %d jobs and %d resources", jobs, resources)
	}
	if r := f.get("/v1/kinds", readToken); len(r.body["kinds"].([]any)) != 2 {
		t.Fatalf("kinds after refused registrations: %s; want build and deploy only", r.raw)
	}
}

func TestIdempotentSubmitWithTheHeader(t *testing.T) {
	f := newJobFixture(t, false)
	submit := func(body string) response {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "deploy-42")
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
	first := submit(`{"kind":"build","resource":"app","args":{"v":1}}`)
	if first.status != 201 || first.header.Get("Idempotency-Replayed") != "" || first.header.Get("Location") == "" {
		t.Fatalf("first submit: %d %v %s", first.status, first.header, first.raw)
	}
	j := job(t, first)
	if j["idempotency_key"] != "deploy-42" || j["state"] != "available" || j["head"] != true ||
		j["args"].(map[string]any)["v"] != float64(1) || j["created_at"] == nil || j["finished_at"] != nil {
		t.Fatalf("submitted job = %v", j)
	}
	if at := j["created_at"].(string); len(at) != len("2006-01-02T15:04:05.000Z") {
		t.Fatalf("created_at = %q; want RFC 3339 in UTC with milliseconds", at)
	}
	// The same key again, even with other fields (the key wins): the same job, 200.
	again := submit(`{"kind":"build","resource":"other","args":{"v":2},"idempotency_key":"deploy-42"}`)
	if again.status != 200 || again.header.Get("Idempotency-Replayed") != "true" || job(t, again)["id"] != j["id"] ||
		job(t, again)["resource"] != "app" {
		t.Fatalf("second submit: %d %v %s; want 200, replayed, job %v", again.status, again.header, again.raw, j["id"])
	}
	if jobs, _ := f.counts(); jobs != 1 {
		t.Fatalf("%d jobs after two submits with one key", jobs)
	}
}

func TestJobLifecycleOverHTTP(t *testing.T) {
	f := newJobFixture(t, true)
	r := f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"repo/app","args":{"ref":"main"},"priority":3}`)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.raw)
	}
	id := job(t, r)["id"].(float64)
	path := fmt.Sprintf("/v1/jobs/%d", int64(id))
	// Queued behind it: a second job, and a reject-kind job is refused naming the head.
	second := job(t, f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"repo/app"}`))
	if second["head"] != false {
		t.Fatalf("second job = %v; want queued, not head", second)
	}
	r = f.post("/v1/jobs", writeToken, `{"kind":"deploy","resource":"repo/app"}`)
	if r.status != 409 || r.body["code"] != "resource_busy" || r.body["resource"] != "repo/app" ||
		r.body["head_job"] != id || r.body["state"] != "available" {
		t.Fatalf("reject on a busy resource: %d %s", r.status, r.raw)
	}
	// Claim, heartbeat, complete.
	r = f.post("/v1/jobs/claim", writeToken, `{"worker":"ci-7","kinds":["build","deploy"],"limit":5,"ttl_ms":60000}`)
	jobs, _ := r.body["jobs"].([]any)
	if r.status != 200 || len(jobs) != 1 {
		t.Fatalf("claim: %d %s; want the head only", r.status, r.raw)
	}
	claimed := jobs[0].(map[string]any)
	token := claimed["token"].(float64)
	if claimed["id"] != id || claimed["state"] != "running" || claimed["worker"] != "ci-7" || token < 1 ||
		claimed["attempt"] != float64(1) || claimed["lease_expires_at"] == nil || claimed["attempted_at"] == nil {
		t.Fatalf("claimed = %v", claimed)
	}
	r = f.post(path+"/heartbeat", writeToken, fmt.Sprintf(`{"token":%d,"ttl_ms":120000}`, int64(token)))
	if r.status != 200 || r.body["cancel_requested"] != false || r.body["ttl_left_ms"].(float64) < 110000 {
		t.Fatalf("heartbeat: %d %s", r.status, r.raw)
	}
	if r = f.post(path+"/heartbeat", writeToken, fmt.Sprintf(`{"token":%d}`, int64(token)+1000)); r.status != 409 || r.body["code"] != "not_held" {
		t.Fatalf("heartbeat with a wrong token: %d %s", r.status, r.raw)
	}
	if r = f.get(path, readToken); job(t, r)["state"] != "running" {
		t.Fatalf("get while running: %s", r.raw)
	}
	r = f.post(path+"/complete", writeToken, fmt.Sprintf(`{"token":%d}`, int64(token)))
	if r.status != 200 || job(t, r)["state"] != "succeeded" || job(t, r)["finished_at"] == nil {
		t.Fatalf("complete: %d %s", r.status, r.raw)
	}
	if r = f.post(path+"/complete", writeToken, fmt.Sprintf(`{"token":%d}`, int64(token))); r.status != 409 || r.body["code"] != "not_held" {
		t.Fatalf("second complete: %d %s", r.status, r.raw)
	}
	// A finished job cannot be cancelled or retried.
	for _, op := range []string{"cancel", "retry"} {
		r = f.post(path+"/"+op, writeToken, "")
		if r.status != 409 || r.body["code"] != "job_state" || r.body["job_id"] != id || r.body["op"] != op || r.body["state"] != "succeeded" {
			t.Fatalf("%s of a succeeded job: %d %s", op, r.status, r.raw)
		}
	}
	// The second job was promoted; it fails twice... once with a backoff, then for good.
	sid := int64(second["id"].(float64))
	spath := fmt.Sprintf("/v1/jobs/%d", sid)
	claimed = f.post("/v1/jobs/claim", writeToken, `{"worker":"ci-7","kinds":["build"]}`).body["jobs"].([]any)[0].(map[string]any)
	r = f.post(spath+"/fail", writeToken, fmt.Sprintf(`{"token":%d,"code":"net_down","message":"unreachable","retry_after_ms":3600000}`,
		int64(claimed["token"].(float64))))
	if j := job(t, r); r.status != 200 || j["state"] != "retryable" || len(j["errors"].([]any)) != 1 ||
		j["errors"].([]any)[0].(map[string]any)["code"] != "net_down" {
		t.Fatalf("fail: %d %s", r.status, r.raw)
	}
	if r = f.post(spath+"/retry", writeToken, "{}"); r.status != 200 || job(t, r)["state"] != "retryable" {
		t.Fatalf("retry of a retryable job: %d %s", r.status, r.raw)
	}
	claimed = f.post("/v1/jobs/claim", writeToken, `{"worker":"ci-7","kinds":["build"]}`).body["jobs"].([]any)[0].(map[string]any)
	r = f.post(spath+"/fail", writeToken, fmt.Sprintf(`{"token":%d,"permanent":true,"message":"bad ref"}`, int64(claimed["token"].(float64))))
	if j := job(t, r); j["state"] != "discarded" || j["attempt"] != float64(2) {
		t.Fatalf("permanent fail: %d %s", r.status, r.raw)
	}
	// Listing, with filters and paging.
	r = f.get("/v1/jobs?kind=build&limit=1", readToken)
	if page := r.body["jobs"].([]any); r.status != 200 || len(page) != 1 || r.body["next_after"] != id {
		t.Fatalf("first page: %d %s", r.status, r.raw)
	}
	r = f.get(fmt.Sprintf("/v1/jobs?kind=build&limit=1&after=%d", int64(id)), readToken)
	if page := r.body["jobs"].([]any); len(page) != 1 || page[0].(map[string]any)["id"] != float64(sid) {
		t.Fatalf("second page: %s", r.raw)
	}
	if r = f.get("/v1/jobs?state=discarded", readToken); len(r.body["jobs"].([]any)) != 1 || r.body["next_after"] != nil {
		t.Fatalf("discarded jobs: %s", r.raw)
	}
	if r = f.get("/v1/jobs/counts", readToken); r.status != 200 || len(r.body["counts"].([]any)) != 0 {
		t.Fatalf("counts with every job finished: %d %s", r.status, r.raw)
	}
	// Resources: state, compare-and-set, listing.
	r = f.get("/v1/resources/repo/app", readToken)
	res := r.body
	if r.status != 200 || res["key"] != "repo/app" || res["unfinished"] != float64(0) || res["running_job"] != float64(0) {
		t.Fatalf("resource: %d %s", r.status, r.raw)
	}
	r = f.put("/v1/resources/repo/app/state", adminToken, `{"state":"FROZEN"}`)
	v, _ := r.body["version"].(float64)
	if r.status != 200 || r.body["state"] != "FROZEN" || r.body["key"] != "repo/app" {
		t.Fatalf("set state: %d %s", r.status, r.raw)
	}
	r = f.put("/v1/resources/repo/app/state", adminToken, fmt.Sprintf(`{"state":"X","if_version":%d}`, int64(v)-1))
	if r.status != 409 || r.body["code"] != "version_mismatch" || r.body["current_version"] != v || r.body["resource"] != "repo/app" {
		t.Fatalf("stale compare-and-set: %d %s", r.status, r.raw)
	}
	if r = f.put("/v1/resources/repo/app/state", writeToken, `{"state":"X"}`); r.status != 403 {
		t.Fatalf("set state with a write token: %d %s", r.status, r.raw)
	}
	if r = f.get("/v1/resources?prefix=repo/", readToken); len(r.body["resources"].([]any)) != 1 {
		t.Fatalf("resources by prefix: %s", r.raw)
	}
	// The dead letter is purged by an admin only.
	if r = f.post("/v1/dlq/purge", writeToken, `{}`); r.status != 403 || r.body["code"] != "forbidden" {
		t.Fatalf("purge with a write token: %d %s", r.status, r.raw)
	}
	if r = f.post("/v1/dlq/purge", adminToken, `{"kind":"build"}`); r.status != 200 || r.body["purged"] != float64(1) {
		t.Fatalf("purge: %d %s", r.status, r.raw)
	}
	if r = f.get(spath, readToken); r.status != 404 {
		t.Fatalf("purged job: %d %s", r.status, r.raw)
	}
}

func TestJobRoles(t *testing.T) {
	f := newJobFixture(t, true)
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
	}{
		{"read token submits", "POST", "/v1/jobs", readToken, `{"kind":"build","resource":"r"}`, 403},
		{"read token claims", "POST", "/v1/jobs/claim", readToken, `{"worker":"w","kinds":["build"]}`, 403},
		{"write token purges", "POST", "/v1/dlq/purge", writeToken, `{}`, 403},
		{"write token registers a kind", "PUT", "/v1/kinds/x", writeToken, `{}`, 403},
		{"write token reaps", "POST", "/v1/jobs/reap", writeToken, `{}`, 403},
		{"no token lists", "GET", "/v1/jobs", "", "", 401},
		{"read token lists", "GET", "/v1/jobs", readToken, "", 200},
		{"read token lists kinds", "GET", "/v1/kinds", readToken, "", 200},
		{"write token submits", "POST", "/v1/jobs", writeToken, `{"kind":"build","resource":"r"}`, 201},
		{"admin token cleans", "POST", "/v1/jobs/clean", adminToken, `{"age_ms":3600000}`, 200},
	} {
		r := f.do(c.method, c.path, c.token, "application/json", c.body)
		if r.status != c.status {
			t.Errorf("%s: %d %s; want %d", c.name, r.status, r.raw, c.status)
		}
		if c.status == 403 && r.body["code"] != "forbidden" {
			t.Errorf("%s: %s; want a forbidden problem", c.name, r.raw)
		}
	}
	if jobs, _ := f.counts(); jobs != 1 {
		t.Fatalf("%d jobs; want only the write token's", jobs)
	}
}

// A waiting claim is answered by the store's wake-up when a job is submitted: the fallback poll
// is an hour and a wait that runs out answers no jobs, so nothing else could answer it with the
// job.
func TestWaitingClaimIsWokenBySubmit(t *testing.T) {
	f := newJobFixture(t, false)
	server.SetClaimPoll(f.srv, time.Hour)
	const wait = 20 * time.Second // the fixture's MaxWait
	got := make(chan response, 1)
	start := time.Now()
	go func() {
		got <- f.post("/v1/jobs/claim", "", fmt.Sprintf(`{"worker":"w","kinds":["deploy","build"],"wait_ms":%d}`, wait.Milliseconds()))
	}()
	<-f.emptyClaim // the claim found nothing: it waits, subscribed
	r := f.post("/v1/jobs", "", `{"kind":"build","resource":"r"}`)
	id := job(t, r)["id"]
	c := <-got
	took := time.Since(start)
	jobs, _ := c.body["jobs"].([]any)
	if c.status != 200 || len(jobs) != 1 || jobs[0].(map[string]any)["id"] != id || jobs[0].(map[string]any)["state"] != "running" {
		t.Fatalf("waiting claim: %d %s; want job %v", c.status, c.raw, id)
	}
	t.Logf("the waiting claim took %s (wait_ms %s)", took.Round(time.Millisecond), wait)
	// A wait that runs out answers no jobs.
	if c = f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["build"],"wait_ms":100}`); c.status != 200 || c.raw != "{\"jobs\":[]}\n" {
		t.Fatalf("claim that waited in vain: %d %q", c.status, c.raw)
	}
}

// Closing the server ends waiting claims at once, with no jobs: before their wait runs out.
func TestWaitingClaimEndsAtShutdown(t *testing.T) {
	f := newJobFixture(t, false)
	server.SetClaimPoll(f.srv, time.Hour)
	const wait = 20 * time.Second // the fixture's MaxWait
	got := make(chan response, 1)
	start := time.Now()
	go func() {
		got <- f.post("/v1/jobs/claim", "", fmt.Sprintf(`{"worker":"w","kinds":["build"],"wait_ms":%d}`, wait.Milliseconds()))
	}()
	<-f.emptyClaim
	f.srv.Close()
	c := <-got
	if c.status != 200 || len(c.body["jobs"].([]any)) != 0 || time.Since(start) >= wait {
		t.Fatalf("claim at shutdown: %d %s after %s; want no jobs, before its %s wait ran out", c.status, c.raw, time.Since(start), wait)
	}
}

// A client that goes away while its claim waits gets no job started: a job submitted after it
// left is claimed by the next claim.
func TestGoneClientGetsNoJob(t *testing.T) {
	f := newJobFixture(t, false)
	server.SetClaimPoll(f.srv, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/v1/jobs/claim",
			strings.NewReader(`{"worker":"gone","kinds":["build"],"wait_ms":15000}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-f.emptyClaim
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled claim request got an answer")
	}
	r := f.post("/v1/jobs", "", `{"kind":"build","resource":"r"}`)
	id := job(t, r)["id"]
	c := f.post("/v1/jobs/claim", "", `{"worker":"next","kinds":["build"]}`)
	if jobs := c.body["jobs"].([]any); len(jobs) != 1 || jobs[0].(map[string]any)["id"] != id || jobs[0].(map[string]any)["worker"] != "next" {
		t.Fatalf("claim after the waiting client left: %s; want job %v for worker next", c.raw, id)
	}
}

func TestJobMetrics(t *testing.T) {
	f := newJobFixture(t, false)
	f.post("/v1/jobs", "", `{"kind":"build","resource":"m/1"}`)
	f.post("/v1/jobs", "", `{"kind":"build","resource":"m/2"}`)
	f.post("/v1/jobs", "", `{"kind":"build","resource":"m/3","delay_ms":3600000}`)
	jobs := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["build"],"limit":10}`).body["jobs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("claimed %v", jobs)
	}
	a, b := jobs[0].(map[string]any), jobs[1].(map[string]any)
	f.post(fmt.Sprintf("/v1/jobs/%d/complete", int64(a["id"].(float64))), "", fmt.Sprintf(`{"token":%d}`, int64(a["token"].(float64))))
	f.post(fmt.Sprintf("/v1/jobs/%d/fail", int64(b["id"].(float64))), "", fmt.Sprintf(`{"token":%d,"retry_after_ms":3600000}`, int64(b["token"].(float64))))
	// What the serve command's maintenance hook reports.
	f.srv.ObserveReaped(&store.ReapedJob{Job: &store.Job{Kind: "build", State: store.JobRetryable}, Reason: store.CodeWorkerTimeout})
	m := f.get("/metrics", "")
	for _, want := range []string{
		`baton_jobs_total{kind="build",state="available"} 2`,
		`baton_jobs_total{kind="build",state="scheduled"} 1`,
		`baton_jobs_total{kind="build",state="succeeded"} 1`,
		`baton_jobs_total{kind="build",state="retryable"} 2`,
		`baton_job_duration_seconds_count{kind="build"} 2`,
		`baton_jobs_running{kind="build"} 0`,
		`baton_job_queue_depth{kind="build"} 2`,
		`baton_jobs_running{kind="deploy"} 0`,
		`baton_job_queue_depth{kind="deploy"} 0`,
		`baton_job_reaped_total{reason="worker_timeout"} 1`,
		`baton_job_reaped_total{reason="lock_state_lost"} 0`,
		`baton_http_request_duration_seconds_count{code="201",method="POST",route="jobs"} 3`,
	} {
		if !strings.Contains(m.raw, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A server whose store has no job queue answers the job routes with 501.
func TestJobRoutesWithoutAJobStore(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })        // after the server (cleanups run last first)
	leasesOnly := struct{ store.Store }{st} // a store.Store and nothing more
	f := serveStore(t, leasesOnly, st, "leases-only")
	for _, c := range []struct{ method, path string }{{"POST", "/v1/jobs"}, {"GET", "/v1/jobs/1"}, {"GET", "/v1/kinds"}, {"GET", "/v1/resources/x"}} {
		if r := f.do(c.method, c.path, "", "application/json", `{}`); r.status != 501 || r.body["code"] != "not_implemented" {
			t.Errorf("%s %s without a job store: %d %s", c.method, c.path, r.status, r.raw)
		}
	}
	if r := f.do("GET", "/v1/info", "", "", ""); r.body["jobs"] != false {
		t.Errorf("info without a job store: %s", r.raw)
	}
	if r := f.do("GET", "/metrics", "", "", ""); r.status != 200 || strings.Contains(r.raw, "baton_jobs_running") {
		t.Errorf("metrics without a job store: %d", r.status)
	}
}
