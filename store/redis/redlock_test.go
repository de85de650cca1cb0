package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
	batonredis "github.com/batonhq/baton/store/redis"
	"github.com/batonhq/baton/store/storetest"
)

func startServers(t testing.TB, n int) ([]*server, []string) {
	var srvs []*server
	var addrs []string
	for range n {
		s := startServer(t, false)
		srvs = append(srvs, s)
		addrs = append(addrs, s.addr())
	}
	return srvs, addrs
}

func openRedlock(t testing.TB, addrs []string, prefix string) *batonredis.RedlockStore {
	t.Helper()
	s, err := batonredis.OpenRedlock(testCtx(t), batonredis.RedlockConfig{Addrs: addrs, KeyPrefix: prefix})
	if err != nil {
		t.Fatalf("OpenRedlock: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestRedlockConformance(t *testing.T) {
	_, addrs := startServers(t, 3)
	storetest.Run(t, storetest.Harness{NewBackend: func(t testing.TB) storetest.Backend {
		prefix := newPrefix()
		return storetest.Backend{
			Open: func(t testing.TB) store.Store { return openRedlock(t, addrs, prefix) },
			DeleteRow: func(t testing.TB, key string) {
				for _, a := range addrs {
					delKey(t, a, prefix+"lease:"+key)
				}
			},
		}
	}})
}

func TestRedlockConfig(t *testing.T) {
	for _, addrs := range [][]string{nil, {"a:1"}, {"a:1", "b:2"}, {"a:1", "b:2", "c:3", "d:4"}} {
		_, err := batonredis.OpenRedlock(context.Background(), batonredis.RedlockConfig{Addrs: addrs})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("OpenRedlock(%v) = %v, want ErrInvalidArgument", addrs, err)
		}
	}
}

// One of three nodes crashes and comes back empty (no persistence) while a lease is held: the
// lease stays exclusive throughout.
func TestRedlockNodeRestart(t *testing.T) {
	srvs, addrs := startServers(t, 3)
	a := openRedlock(t, addrs, "baton:")
	b := openRedlock(t, addrs, "baton:")
	ctx := testCtx(t)

	first, err := acquire(ctx, a, "k1", "a-1")
	if err != nil {
		t.Fatal(err)
	}
	srvs[2].stop()
	// With node 3 down: the held key stays held, and a new key can be acquired on 2 of 3.
	if _, err := acquire(ctx, b, "k1", "b-1"); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("contender with a node down: %v, want ErrLockHeld", err)
	}
	second, err := acquire(ctx, a, "k2", "a-2")
	if err != nil {
		t.Fatalf("acquire on 2 of 3 nodes: %v", err)
	}
	if _, err := acquire(ctx, b, "k2", "b-2"); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("contender for a lease granted on 2 of 3: %v, want ErrLockHeld", err)
	}
	// Exclusion under contention with the node down.
	stats, err := storetest.CheckExclusion(ctx, b, 8, 50, 2)
	if err != nil {
		t.Fatalf("exclusion with a node down: %v", err)
	}
	t.Logf("node 3 down: %d attempts, %d grants, %d held", stats.Attempts, stats.Grants, stats.Held)

	srvs[2].start() // empty: it never saw k2, and forgot k1
	for _, k := range []string{"k1", "k2"} {
		for i := 0; ; i++ {
			_, err := acquire(ctx, b, k, "b-3")
			if errors.Is(err, store.ErrLockHeld) {
				break
			}
			if err == nil {
				t.Fatalf("%s granted to a second holder after node 3 restarted empty", k)
			}
			if i == 50 {
				t.Fatalf("contender for %s after restart: %v, want ErrLockHeld", k, err)
			}
			time.Sleep(20 * time.Millisecond) // the client reconnecting to node 3
		}
	}
	// The holder re-acquires: its lease is renewed on the two nodes that kept it, and the grant
	// that the empty node made to the new ID is undone.
	again, err := a.Acquire(ctx, &store.AcquireParams{Key: "k1", LeaseID: "a-1-again", Holder: first.Holder, TTL: time.Minute})
	if err != nil || again.ID != first.ID {
		t.Fatalf("re-acquire by the holder after the restart = %+v, %v; want lease %s", again, err, first.ID)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addrs[2]})
	defer rdb.Close()
	if id, err := rdb.HGet(ctx, "baton:lease:k1", "id").Result(); !errors.Is(err, goredis.Nil) {
		t.Fatalf("restarted node holds k1 as %q (%v) after the holder's re-acquire; want nothing", id, err)
	}
	for _, l := range []*store.Lease{first, second} {
		got, err := a.Get(ctx, l.Key)
		if err != nil || got.ID != l.ID {
			t.Fatalf("Get(%s) after restart = %+v, %v; want %s", l.Key, got, err, l.ID)
		}
		if _, err := a.Renew(ctx, &store.RenewParams{Key: l.Key, LeaseID: l.ID, TTL: time.Minute}); err != nil {
			t.Fatalf("renew of %s on 2 of 3: %v", l.Key, err)
		}
		if _, err := a.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := acquire(ctx, b, "k1", "b-4"); err != nil {
		t.Fatalf("acquire after release: %v", err)
	} else {
		t.Logf("after the restart and release: granted %s, token %d (per-node tokens: not a fencing token)", l.ID, l.Token)
	}
	stats, err = storetest.CheckExclusion(ctx, b, 8, 50, 2)
	if err != nil {
		t.Fatalf("exclusion after the restart: %v", err)
	}
	t.Logf("node 3 back: %d attempts, %d grants, %d held", stats.Attempts, stats.Grants, stats.Held)
}
