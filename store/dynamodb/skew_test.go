package dynamodb

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
)

// skewed sets the wall clock a store reports and records (AcquiredAt) to be off by offset.
// Expiry must not depend on it: a store that wrote expiry instants from its wall clock and
// compared them with another's would let the contender below (two hours ahead of the holder)
// take a live lease at once.
func skewed(s *Store, offset time.Duration) {
	s.wall = func() time.Time { return time.Now().Add(offset).Round(0) }
}

// TestClockSkew: a holder whose wall clock is an hour behind and a contender whose clock is an
// hour ahead. The contender never takes a lease that is kept alive, and takes over a crashed
// holder's lease only after the TTL has passed since the holder's grant (measured here on the
// test's monotonic clock), reporting TookOver and a greater token.
func TestClockSkew(t *testing.T) {
	d := dynalitetest.Start(t)
	table := freshTable()
	holderStore, contenderStore := openTest(t, d.Endpoint(), table), openTest(t, d.Endpoint(), table)
	skewed(holderStore, -time.Hour)
	skewed(contenderStore, time.Hour)
	holder, err := baton.NewLocker(holderStore, nil)
	if err != nil {
		t.Fatal(err)
	}
	contender, err := baton.NewLocker(contenderStore, &baton.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = time.Second

	// Kept alive for 3.5 TTLs: the contender is refused every time it asks.
	kept, err := holder.TryAcquire(ctx, "skew-kept", baton.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); {
		_, err := contender.TryAcquire(ctx, "skew-kept")
		var held *baton.LockHeldError
		if wait := contenderStore.wait(ttl); !errors.As(err, &held) || held.RetryAfter > wait {
			t.Fatalf("contender on a kept-alive lease: %v; want LockHeldError with RetryAfter <= %s (TTL plus drift)", err, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if kept.Err() != nil {
		t.Fatalf("holder lost its kept-alive lease: %v", kept.Err())
	}
	got, err := contender.Get(ctx, "skew-kept")
	if err != nil || got.ID != kept.ID {
		t.Fatalf("contender Get = %+v, %v", got, err)
	}
	if d := time.Until(got.AcquiredAt); d > -50*time.Minute {
		t.Fatalf("AcquiredAt %s is not the holder's (an hour behind) wall clock", got.AcquiredAt)
	}
	if err := kept.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A crashed holder: granted without keepalive, never released.
	start := time.Now()
	crashed, err := holderStore.Acquire(ctx, &store.AcquireParams{Key: "skew-crash", LeaseID: "crashed", Holder: "crashed", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	took, err := contender.Acquire(ctx, "skew-crash", baton.WithWaitTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer took.Release(ctx)
	if elapsed := time.Since(start); elapsed < contenderStore.wait(ttl) {
		t.Fatalf("taken over %s after the grant began, inside its %s TTL plus drift", elapsed, ttl)
	}
	if !took.TookOver || took.Token <= crashed.Token {
		t.Fatalf("takeover: TookOver %v, token %d after %d", took.TookOver, took.Token, crashed.Token)
	}
}

// A contender's clock may run faster than the holder's by up to the drift factor: it takes over
// only after it has seen the record version unchanged for TTL × (1 + drift) on its own clock,
// not at the TTL (docs/design.md, "Time": "for the TTL (plus drift)"). Its clock is moved by hand here, so
// the test does not depend on timing.
func TestContenderWaitsTheDriftBeyondTheTTL(t *testing.T) {
	d := dynalitetest.Start(t)
	table := freshTable()
	holder, contender := openTest(t, d.Endpoint(), table), openTest(t, d.Endpoint(), table)
	var mu sync.Mutex
	base, off := time.Now(), time.Duration(0)
	contender.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return base.Add(off) }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); off += d }
	contender.drift = 0.1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 10 * time.Second
	if _, err := holder.Acquire(ctx, &store.AcquireParams{Key: "drift", LeaseID: "h", Holder: "holder", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	try := func() (*store.Lease, error) {
		return contender.Acquire(ctx, &store.AcquireParams{Key: "drift", LeaseID: "c", Holder: "contender", TTL: ttl})
	}
	near := func(d, want time.Duration) bool { return d > want-time.Millisecond && d < want+time.Millisecond }
	var held *store.LockHeldError
	if _, err := try(); !errors.As(err, &held) || !near(held.RetryAfter, 11*time.Second) {
		t.Fatalf("first look: %v; want held, retry after TTL × 1.1 = 11s", err)
	}
	advance(ttl + 500*time.Millisecond) // past the TTL, short of TTL × 1.1
	if _, err := try(); !errors.As(err, &held) || !near(held.RetryAfter, 500*time.Millisecond) {
		t.Fatalf("after the TTL: %v; want still held, retry after 500ms", err)
	}
	advance(500 * time.Millisecond)
	l, err := try()
	if err != nil || !l.TookOver {
		t.Fatalf("after TTL × 1.1: %+v, %v; want taken over", l, err)
	}
}
