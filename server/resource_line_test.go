package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// enqueue makes a waiting acquire of key as (leaseID, holder) that is refused, so that its
// ticket waits in the key's line, and returns once the line shows it: a wait that ran out before
// its first attempt reached the store is made again.
func enqueue(f *jobFixture, token, key, leaseID, holder, extra string) {
	f.t.Helper()
	for range 50 {
		r := f.post("/v1/locks/acquire", token, fmt.Sprintf(`{"key":%q,"lease_id":%q,"holder":%q,"ttl_ms":60000,"wait_ms":50%s}`,
			key, leaseID, holder, extra))
		if r.status != 409 {
			f.t.Fatalf("waiting acquire of %s as %s: %d %s; want 409, enqueued", key, holder, r.status, r.raw)
		}
		for _, tk := range lineOf(f.t, f.get("/v1/resources/"+key, adminToken)) {
			if tk["holder"] == holder {
				return
			}
		}
	}
	f.t.Fatalf("the ticket of %s never appeared in the line of %s", holder, key)
}

// lineOf returns an answer's line, failing the test if it has none.
func lineOf(t *testing.T, r response) []map[string]any {
	t.Helper()
	raw, ok := r.body["line"].([]any)
	if r.status != 200 || !ok {
		t.Fatalf("no line in %d %s", r.status, r.raw)
	}
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		out[i] = v.(map[string]any)
	}
	return out
}

// GET /v1/resources/{key} shows who holds the resource, whether it rests and who waits, in
// order, whatever path each came from; a lock-only key is a resource while it is held, waited
// for or rests.
func TestResourceLineOverHTTP(t *testing.T) {
	f := newJobFixture(t, true)
	const key = "line/a"
	if r := f.get("/v1/resources/"+key, readToken); r.status != 404 || r.body["code"] != "not_found" {
		t.Fatalf("a key with nothing: %d %s; want 404", r.status, r.raw)
	}
	r := f.post("/v1/locks/acquire", writeToken, `{"key":"`+key+`","holder":"ops","ttl_ms":60000,"cooldown_ms":3600000}`)
	if r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	lease := r.body["lease"].(map[string]any)
	// A lock-only key: no resources row, yet a resource with its holder and an empty line.
	r = f.get("/v1/resources/"+key, readToken)
	h, _ := r.body["holder"].(map[string]any)
	if r.status != 200 || r.body["state"] != "" || r.body["version"] != float64(0) || h == nil || h["holder"] != "ops" ||
		h["token"] != lease["token"] || h["job"] != nil || h["expires_at"] == nil || r.body["rest"] != nil || len(lineOf(t, r)) != 0 {
		t.Fatalf("a held lock-only key: %d %s; want state \"\", version 0, held by ops, nobody waiting", r.status, r.raw)
	}
	if h["lease_id"] != nil || h["owner"] != "writer" {
		t.Fatalf("a reader sees the holder %v; want its owner, not its lease ID", h)
	}
	if h := f.get("/v1/resources/"+key, writeToken).body["holder"].(map[string]any); h["lease_id"] != lease["lease_id"] {
		t.Fatalf("the lease's owner sees the holder %v; want its lease ID %v", h, lease["lease_id"])
	}

	// The line: a lock request, a job, a scheduled job, then a break-glass request before all.
	enqueue(f, writeToken, key, "w1-lease", "w1", "")
	j := job(t, f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"`+key+`"}`))
	later := job(t, f.post("/v1/jobs", writeToken, `{"kind":"build","resource":"`+key+`","delay_ms":3600000}`))
	enqueue(f, adminToken, key, "bg-lease", "bg", `,"first":true,"first_reason":"incident 7"`)
	r = f.get("/v1/resources/"+key, adminToken)
	l := lineOf(t, r)
	want := []string{"bg", "w1", fmt.Sprintf("job:%v", j["id"]), fmt.Sprintf("job:%v", later["id"])}
	if len(l) != len(want) {
		t.Fatalf("line %s; want %v", r.raw, want)
	}
	for i, tk := range l {
		if tk["holder"] != want[i] || tk["position"] != float64(i+1) || tk["since"] == nil {
			t.Fatalf("ticket %d = %v; want %s at position %d", i, tk, want[i], i+1)
		}
	}
	if bg := l[0]; bg["type"] != "lock" || bg["first"] != true || bg["first_reason"] != "incident 7" || bg["lease_id"] != "bg-lease" ||
		bg["expires_at"] == nil || bg["job"] != nil {
		t.Fatalf("the break-glass ticket: %v", bg)
	}
	if w1 := l[1]; w1["type"] != "lock" || w1["lease_id"] != "w1-lease" || w1["owner"] != "writer" || w1["first"] != nil {
		t.Fatalf("the lock ticket: %v", w1)
	}
	if jt := l[2]; jt["type"] != "job" || jt["job"] != j["id"] || jt["kind"] != "build" || jt["expires_at"] != nil ||
		jt["not_before"] != nil || jt["lease_id"] != nil {
		t.Fatalf("the job ticket: %v; want job %v of kind build, ready, without expiry", jt, j["id"])
	}
	if nb, _ := l[3]["not_before"].(string); nb == "" || !msTime.MatchString(nb) {
		t.Fatalf("the scheduled job's ticket: %v; want not_before", l[3])
	}
	// A reader sees the line without lease IDs; the writer its own lock ticket's only.
	for _, tk := range lineOf(t, f.get("/v1/resources/"+key, readToken)) {
		if tk["lease_id"] != nil {
			t.Fatalf("a reader sees ticket %v; want no lease ID", tk)
		}
	}
	if l := lineOf(t, f.get("/v1/resources/"+key, writeToken)); l[0]["lease_id"] != nil || l[1]["lease_id"] != "w1-lease" {
		t.Fatalf("the writer sees %v and %v; want the lease ID of its own ticket only", l[0], l[1])
	}
	// line_limit bounds the line, from the front.
	if l := lineOf(t, f.get("/v1/resources/"+key+"?line_limit=2", readToken)); len(l) != 2 || l[0]["holder"] != "bg" {
		t.Fatalf("line_limit=2: %v", l)
	}
	for _, bad := range []string{"0", "1001", "x", "-1", ""} {
		r := f.get("/v1/resources/"+key+"?line_limit="+bad, readToken)
		if bad == "" {
			if r.status != 200 {
				t.Fatalf("an empty line_limit: %d %s; want the default", r.status, r.raw)
			}
			continue
		}
		if r.status != 400 || r.body["code"] != "invalid_argument" || r.body["field"] != "line_limit" {
			t.Fatalf("line_limit=%s: %d %s; want 400 naming line_limit", bad, r.status, r.raw)
		}
	}

	// Released with a cooldown: the key rests.
	if r := f.post("/v1/locks/release", writeToken, fmt.Sprintf(`{"key":%q,"lease_id":%q}`, key, lease["lease_id"])); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
	r = f.get("/v1/resources/"+key, readToken)
	rest, _ := r.body["rest"].(map[string]any)
	if r.status != 200 || r.body["holder"] != nil || rest == nil || rest["reason"] != "cooldown" ||
		rest["remaining_ms"].(float64) < 59*60*1000 || !msTime.MatchString(rest["until"].(string)) {
		t.Fatalf("after a release with a cooldown: %d %s; want resting (cooldown), about an hour", r.status, r.raw)
	}
	until, err := time.Parse(time.RFC3339, rest["until"].(string))
	if err != nil || until.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("rest until %v (%v); want about an hour from now", rest["until"], err)
	}
}

// A running job attempt holds its resource: the holder names the job.
func TestResourceLineJobHolder(t *testing.T) {
	f := newJobFixture(t, false)
	j := job(t, f.post("/v1/jobs", "", `{"kind":"build","resource":"line/b"}`))
	r := f.post("/v1/jobs/claim", "", `{"worker":"ci-7","kinds":["build"],"ttl_ms":60000}`)
	claimed, _ := r.body["jobs"].([]any)
	if r.status != 200 || len(claimed) != 1 {
		t.Fatalf("claim: %d %s", r.status, r.raw)
	}
	c := claimed[0].(map[string]any)
	r = f.get("/v1/resources/line/b", "")
	h, _ := r.body["holder"].(map[string]any)
	if r.status != 200 || r.body["running_job"] != j["id"] || h == nil || h["job"] != j["id"] ||
		h["holder"] != fmt.Sprintf("job:%v", j["id"]) || h["token"] != c["token"] || h["lease_id"] != nil || len(lineOf(t, r)) != 0 {
		t.Fatalf("a resource its job's attempt holds: %d %s; want holder job %v, token %v", r.status, r.raw, j["id"], c["token"])
	}
}

// noLine is the SQLite store without its line reader: this ResourceLine hides the store's.
type noLine struct{ *sqlite.Store }

func (noLine) ResourceLine() {}

// On a store that keeps no line, the resource object is as before: no holder, rest or line
// members, and a lock-only key is no resource.
func TestResourceWithoutALine(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: noLine{st}, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	f := &fixture{t: t, url: ts.URL}
	if r := f.post("/v1/locks/acquire", "", `{"key":"lonely","holder":"ops"}`); r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/v1/resources/lonely", "", "", ""); r.status != 404 {
		t.Fatalf("a lock-only key without a line: %d %s; want 404", r.status, r.raw)
	}
	if r := f.do("PUT", "/v1/resources/r/state", "", "application/json", `{"state":"S"}`); r.status != 200 {
		t.Fatalf("set state: %d %s", r.status, r.raw)
	}
	r := f.do("GET", "/v1/resources/r", "", "", "")
	for _, m := range []string{"holder", "rest", "line"} {
		if _, ok := r.body[m]; ok || r.status != 200 {
			t.Fatalf("a resource without a line: %d %s; want no %s member", r.status, r.raw, m)
		}
	}
	if r := f.do("GET", "/v1/resources/r?line_limit=0", "", "", ""); r.status != 400 || r.body["field"] != "line_limit" {
		t.Fatalf("line_limit=0 without a line: %d %s; want 400 naming line_limit", r.status, r.raw)
	}
}
