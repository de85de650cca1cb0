package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// Limits through the API: admin sets and deletes, readers list; an acquire takes units, echoes
// what it holds, and a full limit's refusal names it; bad input is a 400 naming the field, and
// writes nothing.
func TestLimitsAndBeyondOne(t *testing.T) {
	f := newFixture(t, true)
	if r := f.do("PUT", "/v1/limits/gpu/pool", readToken, "application/json", `{"capacity":2}`); r.status != http.StatusForbidden {
		t.Fatalf("reader sets a limit: %d %s, want 403", r.status, r.raw)
	}
	for _, c := range []string{"0", "-1", "1000001"} {
		r := f.do("PUT", "/v1/limits/gpu/pool", adminToken, "application/json", `{"capacity":`+c+`}`)
		if r.status != http.StatusBadRequest || r.body["field"] != "capacity" {
			t.Fatalf("capacity %s: %d %s, want 400 naming capacity", c, r.status, r.raw)
		}
	}
	if r := f.do("GET", "/v1/limits", readToken, "", ""); r.status != 200 || len(r.body["limits"].([]any)) != 0 {
		t.Fatalf("refused limits were written: %d %s", r.status, r.raw)
	}
	r := f.do("PUT", "/v1/limits/gpu/pool", adminToken, "application/json", `{"capacity":2}`)
	if r.status != 200 || r.body["limit"].(map[string]any)["capacity"] != 2.0 {
		t.Fatalf("set limit: %d %s", r.status, r.raw)
	}
	acquire := func(body string) response {
		return f.post("/v1/locks/acquire", writeToken, body)
	}
	for i := range 2 {
		r := acquire(fmt.Sprintf(`{"key":"gpu/pool","holder":"h%d","shared":true,"limits":["gpu/pool"]}`, i))
		l, _ := r.body["lease"].(map[string]any)
		if r.status != 200 || l["shared"] != true || fmt.Sprint(l["limits"]) != "[gpu/pool]" {
			t.Fatalf("unit %d: %d %s, want the lease echoing shared and its limit", i, r.status, r.raw)
		}
	}
	r = acquire(`{"key":"gpu/pool","holder":"h3","shared":true,"limits":["gpu/pool"]}`)
	if r.status != http.StatusConflict || r.body["limit"] != "gpu/pool" || r.body["in_use"] != 2.0 || r.body["capacity"] != 2.0 {
		t.Fatalf("third unit of 2: %d %s, want 409 naming the limit, in_use and capacity", r.status, r.raw)
	}
	r = f.do("GET", "/v1/limits/gpu/pool", readToken, "", "")
	lim, _ := r.body["limit"].(map[string]any)
	if r.status != 200 || lim["in_use"] != 2.0 || len(lim["holders"].([]any)) != 2 {
		t.Fatalf("get limit: %d %s", r.status, r.raw)
	}
	if h := lim["holders"].([]any)[0].(map[string]any); h["lease_id"] != nil {
		t.Fatalf("a reader sees a holder's lease ID: %s", r.raw)
	}
	r = f.do("DELETE", "/v1/limits/gpu/pool", adminToken, "", "")
	if r.status != http.StatusConflict || r.body["code"] != "limit_in_use" || r.body["in_use"] != 2.0 {
		t.Fatalf("delete while held: %d %s, want 409 limit_in_use", r.status, r.raw)
	}

	// Several keys: all or nothing, naming the key that refused.
	if r := acquire(`{"key":"db/b","holder":"b"}`); r.status != 200 {
		t.Fatalf("acquire db/b: %d %s", r.status, r.raw)
	}
	r = acquire(`{"key":"db/a","holder":"ab","resources":["db/b"]}`)
	if r.status != http.StatusConflict || r.body["resource"] != "db/b" || r.body["holder"] != "b" {
		t.Fatalf("db/a with held db/b: %d %s, want 409 naming resource db/b", r.status, r.raw)
	}

	many := make([]string, store.MaxResources+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"x/%d"`, i)
	}
	for _, c := range []struct{ body, field string }{
		{`{"key":"bad","limits":["no-such-limit"]}`, "limits"},
		{`{"key":"bad","resources":[` + strings.Join(many, ",") + `]}`, "resources"},
		{`{"key":"bad","resources":["bad"]}`, "resources"},
	} {
		if r := acquire(c.body); r.status != http.StatusBadRequest || r.body["field"] != c.field {
			t.Fatalf("%s: %d %s, want 400 naming %s", c.body, r.status, r.raw, c.field)
		}
	}
	if r := acquire(`{"key":"ok","resources":["baton/maintenance"]}`); r.status != http.StatusForbidden || r.body["field"] != "resources" {
		t.Fatalf("a reserved resource: %d %s, want 403 naming resources", r.status, r.raw)
	}
	if n := f.leaseCount(); n > 4 {
		t.Fatalf("%d lease rows after refusals", n)
	}
	if r := f.do("DELETE", "/v1/limits/no-such", adminToken, "", ""); r.status != http.StatusNotFound {
		t.Fatalf("delete of an unknown limit: %d %s, want 404", r.status, r.raw)
	}
	if r := f.do("GET", "/v1/limits/no-such", readToken, "", ""); r.status != http.StatusNotFound {
		t.Fatalf("get of an unknown limit: %d %s, want 404", r.status, r.raw)
	}
	r = f.do("GET", "/v1/events?key=gpu/pool", adminToken, "", "")
	if !strings.Contains(r.raw, `"limit":"gpu/pool"`) {
		t.Fatalf("events of gpu/pool name no limit: %s", r.raw)
	}
	if r := f.do("GET", "/v1/info", readToken, "", ""); r.body["limits"] != true {
		t.Fatalf("info: %s, want limits true", r.raw)
	}
}

// noLimits is a store that keeps no limits: it refuses requests beyond one key, as every store
// without store.Limiter does.
type noLimits struct{ store.Store }

func (s noLimits) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.Limits = false
	return c
}

func (s noLimits) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := store.RefuseBeyond("redis", p); err != nil {
		return nil, err
	}
	return s.Store.Acquire(ctx, p)
}

// A store without limits: 501 not_implemented naming the store and the feature, on acquire and
// on the limit routes; never a 500, never a plain lease instead.
func TestBeyondOneUnsupported(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: noLimits{st}, StoreName: "redis", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
	f := &fixture{t: t, url: ts.URL, srv: srv, store: st}
	for body, feature := range map[string]string{
		`{"key":"k","shared":true}`:      "shared mode",
		`{"key":"k","resources":["k2"]}`: "several resources",
		`{"key":"k","limits":["l"]}`:     "limits",
	} {
		r := f.post("/v1/locks/acquire", "", body)
		if r.status != http.StatusNotImplemented || r.body["code"] != "not_implemented" || r.body["store"] != "redis" || r.body["feature"] != feature {
			t.Fatalf("%s: %d %s, want 501 naming redis and %s", body, r.status, r.raw, feature)
		}
	}
	if n := f.leaseCount(); n != 0 {
		t.Fatalf("%d leases after unsupported requests", n)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/limits", ""}, {"GET", "/v1/limits/l", ""}, {"PUT", "/v1/limits/l", `{"capacity":1}`}, {"DELETE", "/v1/limits/l", ""},
	} {
		ct := ""
		if c.body != "" {
			ct = "application/json"
		}
		r := f.do(c.method, c.path, "", ct, c.body)
		if r.status != http.StatusNotImplemented || r.body["feature"] != "limits" {
			t.Fatalf("%s %s: %d %s, want 501 naming limits", c.method, c.path, r.status, r.raw)
		}
	}
	if r := f.do("GET", "/v1/info", "", "", ""); r.body["limits"] != false {
		t.Fatalf("info: %s, want limits false", r.raw)
	}
}
