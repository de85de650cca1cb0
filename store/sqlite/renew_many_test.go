package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// Renewals that queue behind a busy connection share one transaction; each keeps its own answer
// (not held for the wrong IDs, renewed for the others), and every acknowledged renewal is in the
// file after the store is closed and reopened.
func TestRenewalsQueuedTogetherShareATransaction(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "b.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	const n, wrong = 200, 20
	for i := range n {
		if _, err := s.Acquire(ctx, &store.AcquireParams{Key: fmt.Sprintf("k%03d", i), LeaseID: fmt.Sprintf("l%03d", i),
			Holder: "h", TTL: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the store's only connection, so that the renewals queue.
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		i     int
		lease *store.Lease
		err   error
	}
	results := make(chan result, n+wrong)
	var wg sync.WaitGroup
	for i := range n + wrong {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("l%03d", i)
			if i >= n {
				id = "not-this-one"
			}
			l, err := s.Renew(ctx, &store.RenewParams{Key: fmt.Sprintf("k%03d", i%n), LeaseID: id, TTL: time.Hour})
			results <- result{i, l, err}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for sqlite.PendingRenewals(s) != n+wrong {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals pending, want %d", sqlite.PendingRenewals(s), n+wrong)
		}
		time.Sleep(time.Millisecond)
	}
	conn.Close()
	wg.Wait()
	close(results)
	renewed := map[string]time.Time{}
	for r := range results {
		switch {
		case r.i >= n:
			if !errors.Is(r.err, store.ErrNotHeld) {
				t.Errorf("renewal %d with a wrong ID: %v, want ErrNotHeld", r.i, r.err)
			}
		case r.err != nil:
			t.Errorf("renewal %d: %v", r.i, r.err)
		case r.lease.TTLLeft < 59*time.Minute:
			t.Errorf("renewal %d: %s left", r.i, r.lease.TTLLeft)
		default:
			renewed[r.lease.Key] = r.lease.ExpiresAt
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	for k, exp := range renewed {
		l, err := s.Get(ctx, k)
		if err != nil || !l.ExpiresAt.Equal(exp) {
			t.Fatalf("after reopening, %s: %v %v, want expiry %v", k, l, err, exp)
		}
	}
	if len(renewed) != n {
		t.Fatalf("%d renewed, want %d", len(renewed), n)
	}
}
