package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// testRenewMany checks store.RenewMany (one call on a ManyRenewer, one Renew each otherwise):
// every renewal gets its own answer, held leases are extended without a new token, the others
// are ErrNotHeld, and bad input anywhere changes nothing.
func testRenewMany(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	ctx := e.ctx
	const ttl = 5 * time.Second
	acquire := func(key, id string) *store.Lease {
		t.Helper()
		l, err := e.store.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "renew-many", TTL: ttl})
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		t.Cleanup(func() { _, _ = e.store.Release(context.Background(), &store.ReleaseParams{Key: key, LeaseID: id}) })
		return l
	}
	a := acquire("rm/a", "rm-lease-a")
	b := acquire("rm/b", "rm-lease-b")
	c := acquire("rm/c", "rm-lease-c")
	if _, err := e.store.Release(ctx, &store.ReleaseParams{Key: "rm/c", LeaseID: c.ID}); err != nil {
		t.Fatal(err)
	}
	const longer = 20 * time.Second
	ps := []*store.RenewParams{
		{Key: "rm/a", LeaseID: a.ID, TTL: longer},
		{Key: "rm/b", LeaseID: "rm-not-b", TTL: longer}, // another lease's ID
		{Key: "rm/c", LeaseID: c.ID, TTL: longer},       // released
		{Key: "rm/none", LeaseID: "rm-none", TTL: longer},
		{Key: "rm/b", LeaseID: b.ID, TTL: longer},
		{Key: "rm/a", LeaseID: a.ID, TTL: longer}, // the same renewal twice
	}
	res, err := store.RenewMany(ctx, e.store, ps)
	if err != nil {
		t.Fatalf("RenewMany: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("%d results for %d renewals", len(res), len(ps))
	}
	for i, want := range []*store.Lease{a, nil, nil, nil, b, a} {
		r := res[i]
		if want == nil {
			if !errors.Is(r.Err, store.ErrNotHeld) || r.Lease != nil {
				t.Errorf("renewal %d (%s): %+v, %v; want ErrNotHeld", i, ps[i].Key, r.Lease, r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("renewal %d (%s): %v", i, ps[i].Key, r.Err)
			continue
		}
		if r.Lease.Key != want.Key || r.Lease.ID != want.ID || r.Lease.Token != want.Token {
			t.Errorf("renewal %d: got key %q id %q token %d; want %q %q %d", i, r.Lease.Key, r.Lease.ID, r.Lease.Token, want.Key, want.ID, want.Token)
		}
		// The new TTL holds, measured by the store: more than the old TTL is left.
		if r.Lease.TTLLeft <= ttl {
			t.Errorf("renewal %d: %s left, want more than the old TTL %s", i, r.Lease.TTLLeft, ttl)
		}
	}
	// The renewed leases are still held, with their tokens; the released key is still free.
	for _, l := range []*store.Lease{a, b} {
		got, err := e.store.Get(ctx, l.Key)
		if err != nil || got.ID != l.ID || got.Token != l.Token || got.TTLLeft <= ttl {
			t.Errorf("Get(%q) after RenewMany = %+v, %v", l.Key, got, err)
		}
	}
	if got, err := e.store.Get(ctx, "rm/c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(rm/c) after a renewal of its released lease = %+v, %v; want ErrNotFound", got, err)
	}

	// Bad input anywhere rejects the whole batch, naming the renewal, and changes nothing.
	before, err := e.store.Get(ctx, "rm/a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.RenewMany(ctx, e.store, []*store.RenewParams{
		{Key: "rm/a", LeaseID: a.ID, TTL: 50 * time.Second},
		{Key: "rm/b", LeaseID: b.ID, TTL: time.Nanosecond},
	})
	var ia *store.InvalidArgumentError
	if !errors.As(err, &ia) || ia.Field != "leases[1].ttl" {
		t.Fatalf("RenewMany with a bad TTL at index 1: %v; want an invalid argument naming leases[1].ttl", err)
	}
	after, err := e.store.Get(ctx, "rm/a")
	if err != nil {
		t.Fatal(err)
	}
	// A renewal to 50 s would move the expiry by about 30 s; less than 2 s of difference is
	// the store's estimate (etcd's TimeToLive is whole seconds, on the reader's clock).
	if moved := after.ExpiresAt.Sub(before.ExpiresAt); moved >= 2*time.Second {
		t.Errorf("a rejected batch renewed rm/a: expiry %s -> %s", before.ExpiresAt, after.ExpiresAt)
	}
	if _, err := store.RenewMany(ctx, e.store, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("RenewMany(nil) = %v; want an invalid argument", err)
	}
	tooMany := make([]*store.RenewParams, store.MaxRenewMany+1)
	for i := range tooMany {
		tooMany[i] = &store.RenewParams{Key: "rm/a", LeaseID: a.ID, TTL: ttl}
	}
	if _, err := store.RenewMany(ctx, e.store, tooMany); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("RenewMany(%d renewals) = %v; want an invalid argument", len(tooMany), err)
	}
}

// testRenewConcurrent renews many leases from many goroutines at once, as a server with many
// clients does (stores that combine queued renewals into batches must still answer each its
// own): every renewal of a held lease succeeds with its own lease, and every renewal of a
// released one is ErrNotHeld.
func testRenewConcurrent(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	const keys, rounds = 40, 5
	ttl := 10 * time.Second
	leases := make([]*store.Lease, keys)
	for i := range leases {
		key := fmt.Sprintf("rc/%02d", i)
		l, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: fmt.Sprintf("rc-lease-%02d", i), Holder: "rc", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	// Every third lease is released first: its renewals must all fail.
	for i := 0; i < keys; i += 3 {
		if _, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: leases[i].Key, LeaseID: leases[i].ID}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, l := range leases {
			_, _ = e.store.Release(context.Background(), &store.ReleaseParams{Key: l.Key, LeaseID: l.ID})
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, keys*rounds)
	for r := 0; r < rounds; r++ {
		for i, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := e.store.Renew(e.ctx, &store.RenewParams{Key: l.Key, LeaseID: l.ID, TTL: ttl})
				switch {
				case i%3 == 0:
					if !errors.Is(err, store.ErrNotHeld) {
						errs <- fmt.Errorf("renew of released %s: %+v, %v; want ErrNotHeld", l.Key, got, err)
					}
				case err != nil:
					errs <- fmt.Errorf("renew of held %s: %v", l.Key, err)
				case got.Key != l.Key || got.ID != l.ID || got.Token != l.Token:
					errs <- fmt.Errorf("renew of %s answered with %s %s %d", l.Key, got.Key, got.ID, got.Token)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
