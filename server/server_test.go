package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	readToken  = "read-secret"
	writeToken = "write-secret"
	adminToken = "admin-secret"
)

type fixture struct {
	t       *testing.T
	url     string
	srv     *server.Server
	store   *sqlite.Store
	refused <-chan struct{} // closed at the store's first refusal of a held key
}

func newFixture(t *testing.T, withAuth bool) *fixture {
	t.Helper()
	return newFixtureServing(t, withAuth, func(h http.Handler) http.Handler { return validating(t, h) })
}

// newFixtureServing serves the server's handler through wrap.
func newFixtureServing(t *testing.T, withAuth bool, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	signalled, refused := storetest.SignalRefusal(st)
	// The signalling wrapper hides the SQLite store's limits and trees; the server finds them here.
	served := struct {
		storetest.LineStore
		store.Limiter
		store.Treer
	}{signalled.(storetest.LineStore), st, st}
	cfg := server.Config{Store: served, MaxWait: 5 * time.Second, Version: "test", StoreName: "sqlite"}
	if withAuth {
		a, err := server.ParseAuth(strings.NewReader(
			"# test tokens\nreader read " + server.HashToken(readToken) +
				"\nwriter write " + server.HashToken(writeToken) +
				"\nops admin " + server.HashToken(adminToken) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = a
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(wrap(srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &fixture{t: t, url: ts.URL, srv: srv, store: st, refused: refused}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (f *fixture) do(method, path, token, contentType, body string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (f *fixture) post(path, token, body string) response {
	return f.do(http.MethodPost, path, token, "application/json", body)
}

func (f *fixture) leaseCount() int {
	f.t.Helper()
	var n int
	if err := f.store.DB().QueryRow(`SELECT count(*) FROM leases`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func TestBadRequestsGetProblemsAndWriteNothing(t *testing.T) {
	f := newFixture(t, true)
	huge := `{"key":"k","metadata":{"x":"` + strings.Repeat("a", server.MaxBodyBytes) + `"}}`
	cases := []struct {
		name, method, path, token, ctype, body string
		status                                 int
		code, field                            string
	}{
		{"malformed JSON", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":`, 400, "invalid_argument", "body"},
		{"not an object", "POST", "/v1/locks/acquire", writeToken, "application/json", `[1]`, 400, "invalid_argument", "body"},
		{"empty body", "POST", "/v1/locks/acquire", writeToken, "application/json", ``, 400, "invalid_argument", "body"},
		{"trailing data", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k"} {}`, 400, "invalid_argument", "body"},
		{"wrong type", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k","ttl_ms":"15s"}`, 400, "invalid_argument", "ttl_ms"},
		{"key not a string", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":7}`, 400, "invalid_argument", "key"},
		{"unknown field", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k","ttl":15}`, 400, "invalid_argument", "ttl"},
		{"huge body", "POST", "/v1/locks/acquire", writeToken, "application/json", huge, 413, "body_too_large", ""},
		{"not JSON content type", "POST", "/v1/locks/acquire", writeToken, "text/plain", `{"key":"k"}`, 415, "unsupported_media_type", ""},
		{"empty key", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":""}`, 400, "invalid_argument", "key"},
		{"control char key", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"a\u0007b"}`, 400, "invalid_argument", "key"},
		{"long key", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"` + strings.Repeat("k", 513) + `"}`, 400, "invalid_argument", "key"},
		{"TTL too short", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k","ttl_ms":10}`, 400, "invalid_argument", "ttl_ms"},
		{"TTL huge", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k","ttl_ms":9223372036854775807}`, 400, "invalid_argument", "ttl_ms"},
		{"negative wait", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k","wait_ms":-1}`, 400, "invalid_argument", "wait_ms"},
		{"metadata array", "POST", "/v1/locks/acquire", writeToken, "application/json", `{"key":"k","metadata":[1]}`, 400, "invalid_argument", "metadata"},
		{"no token", "POST", "/v1/locks/acquire", "", "application/json", `{"key":"k"}`, 401, "unauthorized", ""},
		{"wrong token", "POST", "/v1/locks/acquire", "nope", "application/json", `{"key":"k"}`, 401, "unauthorized", ""},
		{"read token writes", "POST", "/v1/locks/acquire", readToken, "application/json", `{"key":"k"}`, 403, "forbidden", ""},
		{"write token force-releases", "POST", "/v1/locks/force-release", writeToken, "application/json", `{"key":"k","reason":"x"}`, 403, "forbidden", ""},
		{"no token reads", "GET", "/v1/locks", "", "", "", 401, "unauthorized", ""},
		{"wrong method", "DELETE", "/v1/locks/acquire", writeToken, "", "", 405, "method_not_allowed", ""},
		{"unknown path", "GET", "/v2/locks", readToken, "", "", 404, "no_such_route", ""},
		{"bad list limit", "GET", "/v1/locks?limit=abc", readToken, "", "", 400, "invalid_argument", "limit"},
		{"list limit too big", "GET", "/v1/locks?limit=5000", readToken, "", "", 400, "invalid_argument", "limit"},
		{"release without lease", "POST", "/v1/locks/release", writeToken, "application/json", `{"key":"k"}`, 400, "invalid_argument", "lease_id"},
		{"force-release without reason", "POST", "/v1/locks/force-release", adminToken, "application/json", `{"key":"k"}`, 400, "invalid_argument", "reason"},
	}
	for _, c := range cases {
		r := f.do(c.method, c.path, c.token, c.ctype, c.body)
		if r.status != c.status || r.body["code"] != c.code || (c.field != "" && r.body["field"] != c.field) {
			t.Errorf("%s: %d %s, want %d code=%s field=%s", c.name, r.status, r.raw, c.status, c.code, c.field)
			continue
		}
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
		if r.body["status"] != float64(c.status) || r.body["title"] == "" || r.body["type"] == "" {
			t.Errorf("%s: problem document incomplete: %s", c.name, r.raw)
		}
	}
	if n := f.leaseCount(); n != 0 {
		t.Fatalf("bad requests wrote %d lease rows", n)
	}
	if r := f.do("GET", "/healthz", "", "", ""); r.status != 200 {
		t.Fatalf("server unhealthy after bad requests: %d", r.status)
	}
}

func TestLeaseLifecycleOverHTTP(t *testing.T) {
	f := newFixture(t, true)
	r := f.post("/v1/locks/acquire", writeToken, `{"key":"deploy/api","holder":"job-7","ttl_ms":30000,"metadata":{"job":"7"}}`)
	if r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	lease := r.body["lease"].(map[string]any)
	id, token := lease["lease_id"].(string), lease["token"].(float64)
	if lease["holder"] != "job-7" || token < 1 || lease["ttl_left_ms"].(float64) <= 29000 {
		t.Fatalf("lease = %v", lease)
	}
	// Conflict names the holder, with Retry-After.
	r = f.post("/v1/locks/acquire", writeToken, `{"key":"deploy/api","holder":"job-8"}`)
	if r.status != 409 || r.body["code"] != "lock_held" || r.body["holder"] != "job-7" || r.body["token"] != token ||
		r.header.Get("Retry-After") == "" || !strings.Contains(r.body["detail"].(string), `held by "job-7"`) {
		t.Fatalf("conflict: %d %v %v", r.status, r.header, r.raw)
	}
	// The same holder gets the same lease back.
	if r = f.post("/v1/locks/acquire", writeToken, `{"key":"deploy/api","holder":"job-7"}`); r.status != 200 || r.body["lease"].(map[string]any)["lease_id"] != id {
		t.Fatalf("idempotent re-acquire: %d %s", r.status, r.raw)
	}
	// A reader sees the lease but not its ID (with it, one could renew or release the lease).
	if r = f.do("GET", "/v1/locks/deploy/api", readToken, "", ""); r.status != 200 || r.body["lease"].(map[string]any)["holder"] != "job-7" ||
		strings.Contains(r.raw, id) {
		t.Fatalf("get: %d %s", r.status, r.raw)
	}
	if r = f.do("GET", "/v1/locks/deploy/api", writeToken, "", ""); r.status != 200 || r.body["lease"].(map[string]any)["lease_id"] != id {
		t.Fatalf("get by the owner: %d %s", r.status, r.raw)
	}
	if r = f.do("GET", "/v1/locks?prefix=deploy/", readToken, "", ""); r.status != 200 || len(r.body["leases"].([]any)) != 1 {
		t.Fatalf("list: %d %s", r.status, r.raw)
	}
	if r = f.post("/v1/locks/renew", writeToken, `{"key":"deploy/api","lease_id":"`+id+`","ttl_ms":60000}`); r.status != 200 {
		t.Fatalf("renew: %d %s", r.status, r.raw)
	}
	if r = f.post("/v1/locks/renew", writeToken, `{"key":"deploy/api","lease_id":"other"}`); r.status != 409 || r.body["code"] != "not_held" {
		t.Fatalf("renew by another ID: %d %s", r.status, r.raw)
	}
	if r = f.post("/v1/locks/release", writeToken, `{"key":"deploy/api","lease_id":"`+id+`"}`); r.status != 200 || r.body["released"] != true {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
	if r = f.post("/v1/locks/release", writeToken, `{"key":"deploy/api","lease_id":"`+id+`"}`); r.status != 200 || r.body["already_released"] != true {
		t.Fatalf("second release: %d %s", r.status, r.raw)
	}
	if r = f.do("GET", "/v1/locks/deploy/api", readToken, "", ""); r.status != 404 || r.body["code"] != "not_found" {
		t.Fatalf("get after release: %d %s", r.status, r.raw)
	}
	// Cooldown is a 423 with the remaining time.
	r = f.post("/v1/locks/acquire", writeToken, `{"key":"cool","cooldown_ms":60000}`)
	cid := r.body["lease"].(map[string]any)["lease_id"].(string)
	f.post("/v1/locks/release", writeToken, `{"key":"cool","lease_id":"`+cid+`"}`)
	if r = f.post("/v1/locks/acquire", writeToken, `{"key":"cool"}`); r.status != 423 || r.body["code"] != "cooldown" ||
		r.body["reason"] != "cooldown" || r.body["remaining_ms"].(float64) <= 0 || r.header.Get("Retry-After") == "" {
		t.Fatalf("cooldown: %d %s", r.status, r.raw)
	}
	// Force-release needs admin, and ends the lease.
	r = f.post("/v1/locks/acquire", writeToken, `{"key":"stuck","holder":"wedged"}`)
	if r = f.post("/v1/locks/force-release", adminToken, `{"key":"stuck","reason":"wedged worker"}`); r.status != 200 || r.body["lease"].(map[string]any)["holder"] != "wedged" {
		t.Fatalf("force-release: %d %s", r.status, r.raw)
	}
	if r = f.post("/v1/locks/force-release", adminToken, `{"key":"stuck","reason":"again"}`); r.status != 404 {
		t.Fatalf("force-release of a free key: %d %s", r.status, r.raw)
	}
}

// A waiting acquire is answered by the store's push when the key is released: the fallback poll
// is an hour and the holder's lease has a minute left, so nothing else could grant it within
// its wait.
func TestWaitingAcquireIsWokenByRelease(t *testing.T) {
	f := newFixture(t, false)
	server.SetLockPoll(f.srv, time.Hour)
	r := f.post("/v1/locks/acquire", "", `{"key":"k","ttl_ms":60000}`)
	id := r.body["lease"].(map[string]any)["lease_id"].(string)
	got := make(chan response, 1)
	go func() { got <- f.post("/v1/locks/acquire", "", `{"key":"k","wait_ms":5000}`) }()
	<-f.refused // the server-side waiter was refused once: it is waiting
	released := time.Now()
	f.post("/v1/locks/release", "", `{"key":"k","lease_id":"`+id+`"}`)
	w := <-got
	if w.status != 200 {
		t.Fatalf("waiting acquire: %d %s; want the key, handed over by the release's push", w.status, w.raw)
	}
	t.Logf("waiter got the key %s after the release", time.Since(released).Round(time.Millisecond))
	// A wait that runs out is a 409 naming the holder.
	r = f.post("/v1/locks/acquire", "", `{"key":"k","wait_ms":200,"holder":"late"}`)
	if r.status != 409 || r.body["code"] != "lock_held" {
		t.Fatalf("wait timeout: %d %s", r.status, r.raw)
	}
}

func TestMetricsAndHealth(t *testing.T) {
	f := newFixture(t, false)
	r := f.post("/v1/locks/acquire", "", `{"key":"m"}`)
	id := r.body["lease"].(map[string]any)["lease_id"].(string)
	f.post("/v1/locks/acquire", "", `{"key":"m"}`)
	f.post("/v1/locks/release", "", `{"key":"m","lease_id":"`+id+`"}`)
	// A holder that acquires its own key again renews its lease.
	f.post("/v1/locks/acquire", "", `{"key":"r","holder":"h","ttl_ms":60000}`)
	if r := f.post("/v1/locks/acquire", "", `{"key":"r","holder":"h","ttl_ms":60000}`); r.status != 200 {
		t.Fatalf("re-acquire by the holder: %d %s", r.status, r.raw)
	}
	m := f.do("GET", "/metrics", "", "", "")
	for _, want := range []string{
		`baton_lock_acquisitions_total{result="granted"} 2`,
		`baton_lock_acquisitions_total{result="renewed"} 1`,
		`baton_lock_acquisition_failures_total{reason="held"} 1`,
		`baton_lock_held_duration_seconds_count 1`,
		`baton_locks_held 1`, // "r"
		`baton_lock_expirations_total 0`,
		`baton_http_request_duration_seconds_count{code="200",method="POST",route="acquire"} 3`,
	} {
		if !strings.Contains(m.raw, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if r := f.do("GET", "/readyz", "", "", ""); r.status != 200 {
		t.Fatalf("readyz: %d", r.status)
	}
	f.store.Close()
	if r := f.do("GET", "/readyz", "", "", ""); r.status != 503 || r.body["code"] != "unavailable" {
		t.Fatalf("readyz with the store closed: %d %s", r.status, r.raw)
	}
	if r := f.post("/v1/locks/acquire", "", `{"key":"m"}`); r.status != 503 {
		t.Fatalf("acquire with the store closed: %d %s", r.status, r.raw)
	}
}
