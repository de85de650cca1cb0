package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// jobBackend is a real HTTP server over a SQLite job store.
type jobBackend struct {
	url    string
	sqlite *sqlite.Store
}

func newJobBackend(t testing.TB, auth bool) *jobBackend {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: st, MaxWait: 5 * time.Second, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if auth {
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
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &jobBackend{url: ts.URL, sqlite: st}
}

func (b *jobBackend) open(t testing.TB, cfg client.Config) *client.Store {
	t.Helper()
	cfg.BaseURL = b.url
	s, err := client.NewStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The job-store suite through the HTTP API. Claims do not wait in the server (ClaimWait < 0):
// the suite asks for "nothing claimable" answers many times, and each would otherwise wait.
// Without Advance, the cases that need the store's clock moved are skipped.
func TestJobConformance(t *testing.T) {
	storetest.RunJobs(t, storetest.JobHarness{NewJobStore: func(t *testing.T) store.JobStore {
		return newJobBackend(t, false).open(t, client.Config{ClaimWait: -1})
	}})
}

// The server's refusals come back as the store's errors, with their details.
func TestJobErrorsMapToStoreErrors(t *testing.T) {
	b := newJobBackend(t, true)
	ctx := testContext(t)
	admin := b.open(t, client.Config{Token: adminToken, ClaimWait: -1})
	writer := b.open(t, client.Config{Token: writeToken, ClaimWait: -1})
	reader := b.open(t, client.Config{Token: readToken})
	if err := admin.RegisterKinds(ctx, []store.Kind{{Name: "rej", Policy: store.PolicyReject}}); err != nil {
		t.Fatal(err)
	}
	if err := writer.RegisterKinds(ctx, []store.Kind{{Name: "other"}}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("RegisterKinds with a write token: %v; want ErrForbidden", err)
	}
	if _, err := reader.SubmitJob(ctx, &store.SubmitParams{Kind: "rej", Resource: "x"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("submit with a read token: %v; want ErrForbidden", err)
	}
	res, err := writer.SubmitJob(ctx, &store.SubmitParams{Kind: "rej", Resource: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = writer.SubmitJob(ctx, &store.SubmitParams{Kind: "rej", Resource: "x"})
	var busy *store.ResourceBusyError
	if !errors.As(err, &busy) || busy.Resource != "x" || busy.HeadJob != res.Job.ID || busy.State != store.JobAvailable {
		t.Fatalf("reject on a busy resource: %v; want ResourceBusyError naming job %d", err, res.Job.ID)
	}
	_, err = writer.SubmitJob(ctx, &store.SubmitParams{Kind: "nope", Resource: "x"})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "kind" {
		t.Fatalf("unknown kind: %v; want invalid kind", err)
	}
	if _, err := writer.RetryJob(ctx, res.Job.ID); !errors.Is(err, store.ErrJobState) {
		t.Fatalf("retry of an available job: %v; want JobStateError", err)
	}
	if _, err := reader.GetJob(ctx, res.Job.ID+100); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown job: %v; want ErrNotFound", err)
	}
	if _, err := writer.CompleteJob(ctx, &store.CompleteParams{ID: res.Job.ID, Token: 12345}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("complete with a wrong token: %v; want ErrNotHeld", err)
	}
	v := int64(99)
	_, err = admin.SetResourceState(ctx, &store.SetResourceStateParams{Key: "x", State: "S", IfVersion: &v})
	var mm *store.VersionMismatchError
	if !errors.As(err, &mm) || mm.Key != "x" || mm.Want != 99 {
		t.Fatalf("compare-and-set at a wrong version: %v; want VersionMismatchError", err)
	}
	if _, err := writer.SetResourceState(ctx, &store.SetResourceStateParams{Key: "x", State: "S"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("set state with a write token: %v; want ErrForbidden", err)
	}
	// Keys that the router would clean are escaped both ways.
	for _, key := range []string{"a/", "a//b", "/lead", "x/./y", "x/..", "p%/q", "state/state"} {
		r, err := admin.SetResourceState(ctx, &store.SetResourceStateParams{Key: key, State: "S"})
		if err != nil || r.Key != key {
			t.Fatalf("SetResourceState(%q) = %+v, %v", key, r, err)
		}
		if r, err := reader.GetResource(ctx, key); err != nil || r.Key != key || r.State != "S" {
			t.Fatalf("GetResource(%q) = %+v, %v", key, r, err)
		}
	}
}

// Resources whose keys have ".", ".." or empty segments are each their own through every
// resource route: "evil/../victim" is never "victim" (the path escapes them as %2E and %2F).
func TestResourceKeysWithDotSegmentsRoundTrip(t *testing.T) {
	b := newJobBackend(t, false)
	ctx := testContext(t)
	s := b.open(t, client.Config{ClaimWait: -1})
	keys := []string{"victim", "evil/../victim", "evil/./victim", "evil//victim", ".", "..", "./x", "x/..", "../x", "x/.", "x/", "/x"}
	for i, key := range keys {
		state := "S" + strconv.Itoa(i)
		if r, err := s.SetResourceState(ctx, &store.SetResourceStateParams{Key: key, State: state}); err != nil || r.Key != key || r.State != state {
			t.Fatalf("SetResourceState(%q) = %+v, %v", key, r, err)
		}
	}
	for i, key := range keys {
		if r, err := s.GetResource(ctx, key); err != nil || r.Key != key || r.State != "S"+strconv.Itoa(i) {
			t.Errorf("GetResource(%q) = %+v, %v; want state S%d", key, r, err, i)
		}
	}
	// Each resource cools down after a job of a kind with a resource cooldown; clearing one
	// leaves the others.
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "cool", ResourceCooldown: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "cool", Resource: key}); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"cool"}, Limit: 1, TTL: time.Minute})
		if err != nil || len(jobs) != 1 || jobs[0].Resource != key {
			t.Fatalf("claim on %q: %v, %v", key, jobs, err)
		}
		if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: jobs[0].ID, Token: jobs[0].Token}); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range keys {
		c, err := s.ClearResourceCooldown(ctx, &store.ClearCooldownParams{Resource: key, Reason: "test"})
		if err != nil || c.Resource != key {
			t.Fatalf("ClearResourceCooldown(%q) = %+v, %v", key, c, err)
		}
		for j, other := range keys {
			r, err := s.GetResource(ctx, other)
			if err != nil || (r.Cooldown == nil) != (j <= i) {
				t.Fatalf("after clearing %q: %q cools down: %v (%v), want %v", key, other, r.Cooldown != nil, err, j > i)
			}
		}
	}
}
