package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// Routes that no other server test calls through the validating fixture: their real answers
// must match the document too.
func TestClearRestAnswersMatchTheDocument(t *testing.T) {
	f := newFixture(t, false)
	r := f.post("/v1/locks/acquire", "", `{"key":"deploy/web","holder":"h","ttl_ms":15000,"cooldown_ms":60000}`)
	if r.status != http.StatusOK {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	lease := r.body["lease"].(map[string]any)
	if r := f.post("/v1/locks/release", "", `{"key":"deploy/web","lease_id":"`+lease["lease_id"].(string)+`"}`); r.status != http.StatusOK {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
	r = f.post("/v1/locks/clear-rest", "", `{"key":"deploy/web","reason":"hotfix"}`)
	if r.status != http.StatusOK {
		t.Fatalf("clear-rest: %d %s", r.status, r.raw)
	}
	rest := r.body["rest"].(map[string]any)
	if rest["key"] != "deploy/web" || rest["reason"] != "cooldown" {
		t.Fatalf("clear-rest answered %s, want the cooldown of deploy/web", r.raw)
	}
	// Nothing left to clear: 404, saying why: the key is free, or held (by whom, and what to do).
	r = f.post("/v1/locks/clear-rest", "", `{"key":"deploy/web","reason":"again"}`)
	if d, _ := r.body["detail"].(string); r.status != http.StatusNotFound || !strings.Contains(d, `"deploy/web" is not resting`) ||
		!strings.Contains(d, "free") || strings.Contains(d, "lease") {
		t.Fatalf("clear-rest of a free key: %d %s, want 404 saying it is free and not resting", r.status, r.raw)
	}
	if r := f.post("/v1/locks/acquire", "", `{"key":"deploy/web","holder":"ci-9","ttl_ms":15000}`); r.status != http.StatusOK {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	r = f.post("/v1/locks/clear-rest", "", `{"key":"deploy/web","reason":"held"}`)
	if d, _ := r.body["detail"].(string); r.status != http.StatusNotFound || !strings.Contains(d, `"deploy/web" is not resting`) ||
		!strings.Contains(d, "held by ci-9") || !strings.Contains(d, "force-release") {
		t.Fatalf("clear-rest of a held key: %d %s, want 404 naming the holder and force-release", r.status, r.raw)
	}
	if r := f.post("/v1/locks/clear-rest", "", `{"reason":"no key"}`); r.status != http.StatusBadRequest {
		t.Fatalf("clear-rest without a key: %d %s, want 400", r.status, r.raw)
	}
}

func TestPeriodicAnswerMatchesTheDocument(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Version: "test", StoreName: "sqlite",
		Periodic: []baton.PeriodicJob{{Name: "nightly-backup", Schedule: "@every 1h", Kind: "backup",
			Resource: "db/main", Args: json.RawMessage(`{"full":true}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
	resp, err := http.Get(ts.URL + "/v1/periodic")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Periodic []map[string]any `json:"periodic"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/periodic: %d %v", resp.StatusCode, err)
	}
	if len(body.Periodic) != 1 || body.Periodic[0]["name"] != "nightly-backup" {
		t.Fatalf("periodic = %v, want nightly-backup", body.Periodic)
	}
	next, _ := time.Parse(time.RFC3339Nano, body.Periodic[0]["next_run"].(string))
	if !strings.HasSuffix(body.Periodic[0]["schedule"].(string), "1h") || next.Minute() != 0 || next.Second() != 0 {
		t.Fatalf("periodic = %v, want @every 1h next on the hour", body.Periodic[0])
	}
}
