package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/etcd"
)

// etcdLease is the etcd lease the key's lease record is attached to (0 if the key is free).
func etcdLease(t *testing.T, ctx context.Context, s *etcd.Store, key string) clientv3.LeaseID {
	t.Helper()
	r, err := s.Client().Get(ctx, s.LeaseKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(r.Kvs[0].Lease)
}

// secondsLeft is what etcd says the lease has left, in whole seconds (rounded down).
func secondsLeft(t *testing.T, ctx context.Context, s *etcd.Store, id clientv3.LeaseID) int64 {
	t.Helper()
	r, err := s.Client().TimeToLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r.TTL
}

// A released lease's etcd lease carries the next grant of the same TTL, with its TTL restarted
// for the new holder: if that holder dies, its key still lives its whole TTL, then expires.
func TestReusedEtcdLeaseRestartsAndExpires(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := open(t, shared, fmt.Sprintf("test-%d/", prefixes.Add(1)))
	const ttl = 4 * time.Second
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "first", LeaseID: "a", Holder: "h", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	first := etcdLease(t, ctx, s, "first")
	// Hold it until etcd says it has used up some of its TTL.
	for secondsLeft(t, ctx, s, first) > 2 {
		time.Sleep(50 * time.Millisecond) // the passing of the TTL is what is waited for
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "first", LeaseID: "a"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "second", LeaseID: "b", Holder: "h", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	if got := etcdLease(t, ctx, s, "second"); got != first {
		t.Fatalf("second grant on etcd lease %x, want the released lease's %x reused", got, first)
	}
	// Nobody renews: the key expires, not before its TTL from the start of the acquire. Without
	// the restart it would have expired less than 3 s after it (the lease had <= 2 s left).
	for etcdLease(t, ctx, s, "second") != 0 {
		time.Sleep(50 * time.Millisecond) // the expiry is what is waited for
	}
	if held := time.Since(start); held < ttl {
		t.Fatalf("the key of a dead holder expired %v after its acquire began, before its TTL %v", held, ttl)
	}
}

// A key taken over after its holder's etcd lease expired is not touched by the old holder's
// late release, and an etcd lease revoked by another store's force-release is never reused.
func TestReuseAfterTakeoverAndForceRelease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("test-%d/", prefixes.Add(1))
	s1, s2 := open(t, shared, prefix), open(t, shared, prefix)
	if _, err := s1.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "old", Holder: "h1", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	// The holder dies: nobody renews, and s2 takes the key over once it expired.
	var taken *store.Lease
	for {
		l, err := s2.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "new", Holder: "h2", TTL: time.Minute})
		if errors.Is(err, store.ErrLockHeld) {
			time.Sleep(50 * time.Millisecond) // the expiry is what is waited for
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		taken = l
		break
	}
	if _, err := s1.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "old"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("late release of the expired lease = %v, want ErrNotHeld", err)
	}
	if got, err := s2.Get(ctx, "k"); err != nil || got.ID != "new" || got.Token != taken.Token {
		t.Fatalf("after the late release the key is %+v, %v; want the new holder's", got, err)
	}
	// s2 force-releases a lease s1 granted: s2 revokes its etcd lease, which s1 must not reuse.
	if _, err := s1.Acquire(ctx, &store.AcquireParams{Key: "m", LeaseID: "m1", Holder: "h1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	forced := etcdLease(t, ctx, s1, "m")
	if _, err := s2.ForceRelease(ctx, &store.ForceReleaseParams{Key: "m", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Release(ctx, &store.ReleaseParams{Key: "m", LeaseID: "m1"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("release after a force-release = %v, want ErrNotHeld", err)
	}
	if _, err := s1.Acquire(ctx, &store.AcquireParams{Key: "m2", LeaseID: "m2", Holder: "h1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := etcdLease(t, ctx, s1, "m2"); got == forced || got == 0 {
		t.Fatalf("grant after a force-release on etcd lease %x (the revoked one is %x)", got, forced)
	}
	// A release of s1's own lease frees its etcd lease for s1's next grant of that TTL.
	m2 := etcdLease(t, ctx, s1, "m2")
	if _, err := s1.Release(ctx, &store.ReleaseParams{Key: "m2", LeaseID: "m2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Acquire(ctx, &store.AcquireParams{Key: "m3", LeaseID: "m3", Holder: "h1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := etcdLease(t, ctx, s1, "m3"); got != m2 {
		t.Fatalf("grant after a release on etcd lease %x, want %x reused", got, m2)
	}
}
