package redis_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

// v1 runs the scripts of the earlier key layout (testdata/layout1, the scripts as they were
// before the lease, shadow and rest keys were folded into one record), as a process of the
// earlier version would, under the prefix "baton:".
type v1 struct {
	t                       *testing.T
	rdb                     *goredis.Client
	acquire, renew, release *goredis.Script
}

func newV1(t *testing.T, addr string) *v1 {
	t.Helper()
	load := func(name string) *goredis.Script {
		b, err := os.ReadFile("testdata/layout1/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		return goredis.NewScript(string(b))
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return &v1{t: t, rdb: rdb, acquire: load("acquire"), renew: load("renew"), release: load("release")}
}

func (o *v1) keys(k string) []string {
	return []string{"baton:lease:" + k, "baton:shadow:" + k, "baton:rest:" + k, "baton:token"}
}

// grant acquires k for id (holder id) with the earlier scripts and returns the reply.
func (o *v1) grant(ctx context.Context, k, id string, ttl, cooldown, lockDelay time.Duration) ([]any, error) {
	return o.acquire.Run(ctx, o.rdb, o.keys(k), id, id, ttl.Milliseconds(), "", cooldown.Milliseconds(),
		lockDelay.Milliseconds(), 0, time.Hour.Milliseconds(), 0, "0").Slice()
}

func (o *v1) renewLease(ctx context.Context, k, id string) ([]any, error) {
	return o.renew.Run(ctx, o.rdb, o.keys(k)[:2], id, time.Minute.Milliseconds(), time.Hour.Milliseconds()).Slice()
}

func (o *v1) releaseLease(ctx context.Context, k, id string) ([]any, error) {
	return o.release.Run(ctx, o.rdb, []string{"baton:lease:" + k, "baton:shadow:" + k, "baton:rest:" + k, "baton:released"},
		id, k, time.Hour.Milliseconds(), "0").Slice()
}

func (o *v1) keyType(ctx context.Context, k string) string {
	o.t.Helper()
	typ, err := o.rdb.Type(ctx, k).Result()
	if err != nil {
		o.t.Fatal(err)
	}
	return typ
}

// A lease granted by the earlier version (a hash at lease:K, with shadow and rest keys) is
// honoured, renewed, re-acquired by its holder and released by the current scripts in its own
// layout, so that a process of the earlier version can still work on it; the next grant writes
// the folded record and deletes the earlier keys; tokens continue from the same counter.
func TestLayoutMigrationLiveOldLease(t *testing.T) {
	srv := startServer(t, false)
	ctx := testCtx(t)
	old := newV1(t, srv.addr())
	if err := old.rdb.Set(ctx, "baton:token", 41, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := old.grant(ctx, "k", "old", time.Minute, 0, 0); err != nil || v[0] != "new" || v[1] != int64(42) {
		t.Fatalf("grant by the earlier scripts: %v, %v", v, err)
	}
	s := openSingle(t, srv.addr(), "baton:")

	var held *store.LockHeldError
	if _, err := acquire(ctx, s, "k", "n1"); !errors.As(err, &held) || held.Holder != "old" || held.Token != 42 {
		t.Fatalf("acquire over a live lease of the earlier layout: %v, want held by old, token 42", err)
	}
	if l, err := s.Get(ctx, "k"); err != nil || l.ID != "old" || l.Token != 42 {
		t.Fatalf("Get of a lease of the earlier layout: %+v, %v", l, err)
	}
	l, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "old", TTL: 2 * time.Minute})
	if err != nil || l.Token != 42 || l.TTLLeft != 2*time.Minute {
		t.Fatalf("renew of a lease of the earlier layout: %+v, %v", l, err)
	}
	if typ := old.keyType(ctx, "baton:lease:k"); typ != "hash" {
		t.Fatalf("the renewed lease of the earlier layout is a %s, want it kept as a hash", typ)
	}
	if pttl := old.rdb.PTTL(ctx, "baton:lease:k").Val(); pttl <= time.Minute {
		t.Fatalf("PTTL after the renew: %s, want the new 2m TTL", pttl)
	}
	if v, err := old.renewLease(ctx, "k", "old"); err != nil || v[0] != "ok" {
		t.Fatalf("the earlier scripts renewing after the current ones: %v, %v", v, err)
	}
	again, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "old-again", Holder: "old", TTL: time.Minute})
	if err != nil || again.ID != "old" || again.Token != 42 {
		t.Fatalf("re-acquire by the holder of a lease of the earlier layout: %+v, %v", again, err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "old"}); err != nil || r.AlreadyReleased {
		t.Fatalf("release of a lease of the earlier layout: %+v, %v", r, err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "old"}); err != nil || !r.AlreadyReleased {
		t.Fatalf("second release of a lease of the earlier layout: %+v, %v", r, err)
	}

	n1, err := acquire(ctx, s, "k", "n1")
	if err != nil || n1.Token != 43 || n1.TookOver {
		t.Fatalf("grant after the release: %+v, %v; want token 43, no takeover", n1, err)
	}
	if typ := old.keyType(ctx, "baton:lease:k"); typ != "string" {
		t.Fatalf("lease:k after a grant is a %s, want the folded record (a string)", typ)
	}
	if n := old.rdb.Exists(ctx, "baton:shadow:k", "baton:rest:k").Val(); n != 0 {
		t.Fatalf("%d keys of the earlier layout left after the grant", n)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "n1"}); err != nil || r.AlreadyReleased {
		t.Fatalf("release: %+v, %v", r, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "n1", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew after release: %v, want ErrNotHeld", err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "n1"}); err != nil || !r.AlreadyReleased {
		t.Fatalf("second release: %+v, %v", r, err)
	}

	// A process of the earlier version meets the record: its scripts fail (WRONGTYPE) before
	// writing anything, so it never grants over it.
	before := old.rdb.Get(ctx, "baton:lease:k").Val()
	for name, run := range map[string]func() ([]any, error){
		"acquire": func() ([]any, error) { return old.grant(ctx, "k", "old2", time.Minute, 0, 0) },
		"renew":   func() ([]any, error) { return old.renewLease(ctx, "k", "n1") },
		"release": func() ([]any, error) { return old.releaseLease(ctx, "k", "n1") },
	} {
		if v, err := run(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("the earlier %s script on a record: %v, %v; want a WRONGTYPE error", name, v, err)
		}
	}
	if after := old.rdb.Get(ctx, "baton:lease:k").Val(); after != before {
		t.Fatal("the earlier scripts changed the record")
	}
	if n := old.rdb.Exists(ctx, "baton:shadow:k", "baton:rest:k").Val(); n != 0 {
		t.Fatalf("the earlier scripts wrote %d keys of their layout", n)
	}
	if n2, err := acquire(ctx, s, "k", "n2"); err != nil || n2.Token != 44 {
		t.Fatalf("grant after the earlier scripts failed: %+v, %v; want token 44", n2, err)
	}
}

// What the earlier layout records about a lease that ended (an expiry with lock-delay, a release
// with cooldown, a force-release) is honoured by the first grant on the key, which then
// converts it.
func TestLayoutMigrationEndedOldLease(t *testing.T) {
	srv := startServer(t, false)
	ctx := testCtx(t)
	old := newV1(t, srv.addr())
	s := openSingle(t, srv.addr(), "baton:")
	var cd *store.RestingError

	// Expired with a minute's lock-delay (the expiry is the lease key's deletion).
	if _, err := old.grant(ctx, "a", "old-a", time.Minute, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	delKey(t, srv.addr(), "baton:lease:a")
	if _, err := acquire(ctx, s, "a", "n"); !errors.As(err, &cd) || cd.Reason != "lock-delay" || cd.Remaining < 50*time.Second {
		t.Fatalf("acquire in the lock-delay of an expired lease of the earlier layout: %v", err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "a", LeaseID: "old-a"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("release of an expired lease of the earlier layout: %v, want ErrNotHeld", err)
	}

	// Expired without lock-delay: the next grant is a takeover, with a larger token.
	v, err := old.grant(ctx, "b", "old-b", time.Minute, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// As the keys are once the lease's minute ran out: the lease key gone, the shadow's
	// expiry + lock-delay passed.
	delKey(t, srv.addr(), "baton:lease:b")
	if err := old.rdb.HSet(ctx, "baton:shadow:b", "avail", time.Now().Add(-time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := acquire(ctx, s, "b", "n")
	if err != nil || !l.TookOver || l.Token <= uint64(v[1].(int64)) {
		t.Fatalf("grant after an expired lease of the earlier layout: %+v, %v; want a takeover above token %v", l, err, v[1])
	}
	if n := old.rdb.Exists(ctx, "baton:shadow:b").Val(); n != 0 {
		t.Fatal("the shadow of the earlier layout is left after the grant")
	}

	// Released with a minute's cooldown by the earlier scripts.
	if _, err := old.grant(ctx, "c", "old-c", time.Minute, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := old.releaseLease(ctx, "c", "old-c"); err != nil || v[0] != "ok" {
		t.Fatalf("release by the earlier scripts: %v, %v", v, err)
	}
	if _, err := acquire(ctx, s, "c", "n"); !errors.As(err, &cd) || cd.Reason != "cooldown" {
		t.Fatalf("acquire in the cooldown of a release of the earlier layout: %v", err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "c", LeaseID: "old-c"}); err != nil || !r.AlreadyReleased {
		t.Fatalf("second release of a release of the earlier layout: %+v, %v", r, err)
	}

	// Force-released by the current scripts while in the earlier layout, with lock-delay.
	if _, err := old.grant(ctx, "d", "old-d", time.Minute, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "d", Reason: "migration test"}); err != nil || l.ID != "old-d" {
		t.Fatalf("force-release of a lease of the earlier layout: %+v, %v", l, err)
	}
	if _, err := acquire(ctx, s, "d", "n"); !errors.As(err, &cd) || cd.Reason != "lock-delay" {
		t.Fatalf("acquire in the lock-delay of a force-release of the earlier layout: %v", err)
	}
}

// An uncontended grant and release touch the lease key and the token counter only: no shadow,
// rest or wake key is written.
func TestGrantWritesOneKey(t *testing.T) {
	srv := startServer(t, false)
	s := openSingle(t, srv.addr(), "baton:")
	ctx := testCtx(t)
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "a", TTL: time.Minute,
		Cooldown: time.Minute, LockDelay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "a"}); err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	keys, err := admin.Keys(ctx, "baton:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("keys after a grant and a release: %v, want baton:lease:k and baton:token", keys)
	}
	var cd *store.RestingError
	if _, err := acquire(ctx, s, "k", "b"); !errors.As(err, &cd) || cd.Reason != "cooldown" {
		t.Fatalf("acquire in the cooldown: %v", err)
	}
}
