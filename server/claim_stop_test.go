package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// stopFixture serves a SQLite job store with authentication and claims that may wait ten
// minutes, longer than any test waits.
func stopFixture(t *testing.T) (*fixture, *server.Server) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := server.ParseAuth(strings.NewReader("writer write " + server.HashToken(writeToken) +
		"\nops admin " + server.HashToken(adminToken) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Auth: a, MaxWait: 10 * time.Minute, Version: "test",
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
	return &fixture{t: t, url: ts.URL, srv: srv, store: st}, srv
}

// claimAsync posts a claim that waits ten minutes for a job, named id; the channel gets its answer.
func claimAsync(f *fixture, token, id string) <-chan response {
	got := make(chan response, 1)
	go func() {
		got <- f.post("/v1/jobs/claim", token, `{"worker":"w","kinds":["k"],"wait_ms":600000,"wait_id":"`+id+`"}`)
	}()
	return got
}

func answered(t *testing.T, got <-chan response, what string) response {
	t.Helper()
	select {
	case r := <-got:
		if r.status != 200 || !strings.Contains(r.raw, `"jobs":[]`) {
			t.Fatalf("%s: %d %s; want 200 and no jobs", what, r.status, r.raw)
		}
		return r
	case <-time.After(server.HangGuard):
		t.Fatalf("%s: no answer in %s: the claim waits out its wait", what, server.HangGuard)
		return response{}
	}
}

// POST /v1/jobs/claim/stop ends the wait of the caller's own claim of that name, which answers
// (no jobs) at once; another principal's stop of the same name ends nothing. A stop that
// overtakes its claim makes that claim not wait.
func TestClaimStopEndsOnlyTheCallersWait(t *testing.T) {
	f, srv := stopFixture(t)
	got := claimAsync(f, writeToken, "w1")
	for server.WaitingClaims(srv) == 0 {
		runtime.Gosched() // the claim is on its way; the test's deadline bounds this
	}
	if r := f.post("/v1/jobs/claim/stop", adminToken, `{"wait_id":"w1"}`); r.status != 200 || r.body["stopped"] != false {
		t.Fatalf("another principal's stop: %d %s; want 200 stopped false", r.status, r.raw)
	}
	if n := server.WaitingClaims(srv); n != 1 {
		t.Fatalf("after another principal's stop %d claims wait; want the writer's 1", n)
	}
	if r := f.post("/v1/jobs/claim/stop", writeToken, `{"wait_id":"w1"}`); r.status != 200 || r.body["stopped"] != true {
		t.Fatalf("the owner's stop: %d %s; want 200 stopped true", r.status, r.raw)
	}
	answered(t, got, "the stopped claim")

	// The stop before its claim.
	if r := f.post("/v1/jobs/claim/stop", writeToken, `{"wait_id":"w2"}`); r.status != 200 || r.body["stopped"] != false {
		t.Fatalf("a stop before its claim: %d %s; want 200 stopped false", r.status, r.raw)
	}
	answered(t, claimAsync(f, writeToken, "w2"), "a claim stopped before it arrived")

	for _, c := range []struct{ path, body, rule string }{
		{"/v1/jobs/claim/stop", `{"wait_id":""}`, "must not be empty"},
		{"/v1/jobs/claim/stop", `{"wait_id":"a b"}`, "must hold only"},
		{"/v1/jobs/claim", `{"worker":"w","kinds":["k"],"wait_ms":1,"wait_id":"` + strings.Repeat("x", 65) + `"}`, "at most 64"},
	} {
		r := f.post(c.path, writeToken, c.body)
		if r.status != 400 || r.body["field"] != "wait_id" || !strings.Contains(r.raw, c.rule) {
			t.Errorf("POST %s %s: %d %s; want 400 naming wait_id: %s", c.path, c.body, r.status, r.raw, c.rule)
		}
	}
}
