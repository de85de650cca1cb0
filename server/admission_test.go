package server_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

// blockingStore is a deliberately slowed store: once armed, every call reports itself on calls
// and then waits until unblock is closed (or its context ends) before reaching the real store.
type blockingStore struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	unblock chan struct{}
	calls   chan string
}

func (b *blockingStore) hold(ctx context.Context, call string) error {
	b.mu.Lock()
	armed := b.armed
	b.mu.Unlock()
	if !armed {
		return nil
	}
	b.calls <- call
	select {
	case <-b.unblock:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *blockingStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := b.hold(ctx, "acquire "+p.Key); err != nil {
		return nil, err
	}
	return b.Store.Acquire(ctx, p)
}

func (b *blockingStore) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := b.hold(ctx, "renew "+p.Key); err != nil {
		return nil, err
	}
	return b.Store.Renew(ctx, p)
}

func (b *blockingStore) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := b.hold(ctx, "list"); err != nil {
		return nil, err
	}
	return b.Store.List(ctx, p)
}

// waitForMetric polls /metrics until it shows line (a condition, not a fixed sleep).
func waitForMetric(t *testing.T, f *fixture, line string) {
	t.Helper()
	deadline := time.Now().Add(server.HangGuard)
	for {
		m := f.do("GET", "/metrics", "", "", "")
		if strings.Contains(m.raw, line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics did not show %q in %s (hung):\n%s", line, server.HangGuard, m.raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With one store call in flight at a time and room for two waiting new calls, a slowed store
// makes the server shed new acquires (waiting or not) and listings with 503 overloaded and
// Retry-After, while a renewal is admitted, and served before the acquires queued ahead of it.
// The metrics count the queue and the shed calls; the Go client reports Retry-After.
func TestOverloadShedsNewWorkAndAdmitsRenewalsFirst(t *testing.T) {
	blk := &blockingStore{Store: openSQLiteStore(t), unblock: make(chan struct{}), calls: make(chan string, 16)}
	srv, err := server.New(server.Config{Store: blk, MaxWait: 5 * time.Second, MaxInflight: 1, MaxQueue: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	f := &fixture{t: t, url: ts.URL}
	r := f.post("/v1/locks/acquire", "", `{"key":"held","ttl_ms":60000}`)
	if r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	id := r.body["lease"].(map[string]any)["lease_id"].(string)

	blk.mu.Lock()
	blk.armed = true
	blk.mu.Unlock()
	results := make(chan response, 8)
	go func() { results <- f.post("/v1/locks/acquire", "", `{"key":"a1"}`) }()
	if c := <-blk.calls; c != "acquire a1" {
		t.Fatalf("first call at the store: %q", c)
	}
	for _, k := range []string{"a2", "a3"} {
		go func() { results <- f.post("/v1/locks/acquire", "", `{"key":"`+k+`"}`) }()
	}
	waitForMetric(t, f, `baton_store_queue_depth{class="new"} 2`)

	// New work is shed at once, with Retry-After.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/locks/acquire", `{"key":"a4"}`},
		{"POST", "/v1/locks/acquire", `{"key":"a5","wait_ms":3000}`},
		{"GET", "/v1/locks", ""},
	} {
		r := f.do(c.method, c.path, "", "application/json", c.body)
		if r.status != 503 || r.body["code"] != "overloaded" || r.header.Get("Retry-After") != "1" || r.body["retry_after_ms"] != 1000.0 {
			t.Fatalf("%s %s %s under overload: %d %v %s", c.method, c.path, c.body, r.status, r.header, r.raw)
		}
	}
	// So is the Go client's call, which carries the server's Retry-After.
	cl, err := client.NewStore(client.Config{BaseURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Acquire(context.Background(), &store.AcquireParams{Key: "a6", LeaseID: "l6", Holder: "h6", TTL: time.Minute})
	var pe *client.ProblemError
	if !errors.As(err, &pe) || pe.Code != "overloaded" || pe.RetryAfterHint() != time.Second || !pe.Retryable() {
		t.Fatalf("client acquire under overload: %v (%+v)", err, pe)
	}

	// A renewal is admitted though the new queue is full, and goes first.
	go func() {
		results <- f.post("/v1/locks/renew", "", `{"key":"held","lease_id":"`+id+`","ttl_ms":60000}`)
	}()
	waitForMetric(t, f, `baton_store_queue_depth{class="keep"} 1`)
	close(blk.unblock)
	if c := <-blk.calls; c != "renew held" {
		t.Fatalf("after the call in flight, the store got %q; want the renewal first", c)
	}
	for range 4 {
		if r := <-results; r.status != 200 {
			t.Fatalf("admitted call: %d %s", r.status, r.raw)
		}
	}
	m := f.do("GET", "/metrics", "", "", "")
	for _, want := range []string{
		`baton_store_shed_total{class="new"} 4`,
		`baton_store_shed_total{class="keep"} 0`,
		`baton_lock_acquisition_failures_total{reason="overloaded"} 3`,
		`baton_store_queue_depth{class="new"} 0`,
		`baton_store_queue_depth{class="keep"} 0`,
	} {
		if !strings.Contains(m.raw, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
