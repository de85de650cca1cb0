package redis_test

import (
	"errors"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

// prevRecord runs the grant and release scripts of the version before the scripts' arguments
// were trimmed (testdata/record1: the same record layout, with every key and argument passed),
// as a process of that version would during a rolling upgrade, under the prefix "baton:".
type prevRecord struct {
	rdb              *goredis.Client
	acquire, release *goredis.Script
}

func newPrevRecord(t *testing.T, addr string) *prevRecord {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return &prevRecord{rdb: rdb, acquire: loadScript(t, "record1", "acquire"), release: loadScript(t, "record1", "release")}
}

// loadScript reads testdata/<dir>/<name>.lua: a script of an earlier version.
func loadScript(t *testing.T, dir, name string) *goredis.Script {
	t.Helper()
	b, err := os.ReadFile("testdata/" + dir + "/" + name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	return goredis.NewScript(string(b))
}

func (o *prevRecord) grant(t *testing.T, k, id string, cooldown time.Duration) []any {
	t.Helper()
	v, err := o.acquire.Run(testCtx(t), o.rdb,
		[]string{"baton:lease:" + k, "baton:shadow:" + k, "baton:rest:" + k, "baton:token", "baton:wake:" + k},
		id, id, time.Minute.Milliseconds(), "", cooldown.Milliseconds(), 0, 0, time.Hour.Milliseconds(), 0, "0", "0").Slice()
	if err != nil {
		t.Fatalf("grant by the previous scripts: %v", err)
	}
	return v
}

func (o *prevRecord) releaseLease(t *testing.T, k, id string) []any {
	t.Helper()
	v, err := o.release.Run(testCtx(t), o.rdb,
		[]string{"baton:lease:" + k, "baton:shadow:" + k, "baton:rest:" + k, "baton:released", "baton:wake:" + k},
		id, k, time.Hour.Milliseconds(), "0").Slice()
	if err != nil {
		t.Fatalf("release by the previous scripts: %v", err)
	}
	return v
}

// The previous version's scripts and the current ones share the record: a lease granted by
// either is held against, released by and followed by the other, with increasing tokens,
// AlreadyReleased and cooldown kept.
func TestRecordSharedWithPreviousScripts(t *testing.T) {
	srv := startServer(t, false)
	ctx := testCtx(t)
	prev := newPrevRecord(t, srv.addr())
	s := openSingle(t, srv.addr(), "baton:")

	// The previous version grants; the current one sees it held, releases it and grants next.
	if v := prev.grant(t, "k", "p1", 0); v[0] != "new" || v[1] != int64(1) {
		t.Fatalf("previous grant: %v, want new with token 1", v)
	}
	var held *store.LockHeldError
	if _, err := acquire(ctx, s, "k", "c1"); !errors.As(err, &held) || held.Holder != "p1" || held.Token != 1 {
		t.Fatalf("current acquire over the previous version's lease: %v, want held by p1, token 1", err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "p1"}); err != nil || r.AlreadyReleased {
		t.Fatalf("current release of the previous version's lease: %+v, %v", r, err)
	}
	if v := prev.releaseLease(t, "k", "p1"); v[0] != "already" {
		t.Fatalf("previous release after the current one: %v, want already", v)
	}
	c1, err := acquire(ctx, s, "k", "c1")
	if err != nil || c1.Token != 2 || c1.TookOver {
		t.Fatalf("current grant after the release: %+v, %v; want token 2, no takeover", c1, err)
	}

	// The current version grants; the previous one sees it held and releases it.
	if v := prev.grant(t, "k", "p2", 0); v[0] != "held" || v[1] != "c1" {
		t.Fatalf("previous grant over the current version's lease: %v, want held by c1", v)
	}
	if v := prev.releaseLease(t, "k", "c1"); v[0] != "ok" {
		t.Fatalf("previous release of the current version's lease: %v, want ok", v)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "c1"}); err != nil || !r.AlreadyReleased {
		t.Fatalf("current release after the previous one: %+v, %v, want AlreadyReleased", r, err)
	}

	// A cooldown started by a release of either version holds for the other's grants.
	if v := prev.grant(t, "k", "p3", time.Minute); v[0] != "new" || v[1] != int64(3) {
		t.Fatalf("previous grant with a cooldown: %v, want new with token 3", v)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "p3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, s, "k", "c2"); !errors.Is(err, store.ErrResting) {
		t.Fatalf("current grant in the cooldown of the previous version's lease: %v, want ErrResting", err)
	}
	c3, err := s.Acquire(ctx, &store.AcquireParams{Key: "k2", LeaseID: "c3", Holder: "c3", TTL: time.Minute, Cooldown: time.Minute})
	if err != nil || c3.Token != 4 {
		t.Fatalf("current grant with a cooldown: %+v, %v; want token 4", c3, err)
	}
	if v := prev.releaseLease(t, "k2", "c3"); v[0] != "ok" {
		t.Fatalf("previous release of the current version's lease: %v, want ok", v)
	}
	if v := prev.grant(t, "k2", "p4", 0); v[0] != "rest" || v[1] != "cooldown" {
		t.Fatalf("previous grant in the cooldown of the current version's lease: %v, want rest cooldown", v)
	}
	if _, err := acquire(ctx, s, "k2", "c4"); !errors.Is(err, store.ErrResting) {
		t.Fatalf("current grant in the cooldown it started through the previous release: %v, want ErrResting", err)
	}
}

// prevOwnerless runs the grant, renew and release scripts of the version before owners
// (testdata/record2: the record of 14 values, the trimmed arguments), as a process of that
// version would during a rolling upgrade, under the prefix "baton:".
type prevOwnerless struct {
	t                       *testing.T
	rdb                     *goredis.Client
	acquire, renew, release *goredis.Script
}

func newPrevOwnerless(t *testing.T, addr string) *prevOwnerless {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return &prevOwnerless{t: t, rdb: rdb, acquire: loadScript(t, "record2", "acquire"),
		renew: loadScript(t, "record2", "renew"), release: loadScript(t, "record2", "release")}
}

// grant acquires k for lease id and holder for a minute; with wait, as a caller that waits if
// refused (a refusal marks the lease).
func (o *prevOwnerless) grant(k, id, holder string, wait bool) []any {
	o.t.Helper()
	args := []any{id, holder, time.Minute.Milliseconds(), 0, time.Hour.Milliseconds()}
	if wait {
		args = append(args, "", 0, 0, "1")
	}
	v, err := o.acquire.Run(testCtx(o.t), o.rdb, []string{"baton:lease:" + k, "baton:token"}, args...).Slice()
	if err != nil {
		o.t.Fatalf("grant by the previous scripts: %v", err)
	}
	return v
}

func (o *prevOwnerless) renewLease(k, id string) []any {
	o.t.Helper()
	v, err := o.renew.Run(testCtx(o.t), o.rdb, []string{"baton:lease:" + k, "baton:shadow:" + k, "baton:wake:" + k},
		id, time.Minute.Milliseconds(), time.Hour.Milliseconds(), "0").Slice()
	if err != nil {
		o.t.Fatalf("renew by the previous scripts: %v", err)
	}
	return v
}

func (o *prevOwnerless) releaseLease(k, id string) []any {
	o.t.Helper()
	v, err := o.release.Run(testCtx(o.t), o.rdb, []string{"baton:lease:" + k}, id, k, time.Hour.Milliseconds()).Slice()
	if err != nil {
		o.t.Fatalf("release by the previous scripts: %v", err)
	}
	return v
}

// values is the number of MessagePack values in k's record.
func (o *prevOwnerless) values(k string) int64 {
	o.t.Helper()
	n, err := o.rdb.Eval(testCtx(o.t), `return select('#', cmsgpack.unpack(redis.call('GET', KEYS[1])))`,
		[]string{"baton:lease:" + k}).Int64()
	if err != nil {
		o.t.Fatal(err)
	}
	return n
}

// The version before owners and the current one share locks both ways during a rolling upgrade.
// A lease without an owner is the same 14-value record in both, and the current version serves
// the previous one's leases as leases without an owner. The previous version reads a record with
// an owner (its 15th value) and honours the lease, but knows no owners: it enforces none, and
// when it rewrites a live lease (a renewal, a re-acquire by its holder, a waiter's mark) the
// owner is lost. The lease then has no owner: its owner's renewals and release through the
// current version are refused (ErrNotHeld, so its holder stops), and the key stays held, its
// ID, token and expiry unchanged, until the lease ends. A release by the previous version
// releases it for both.
func TestRecordOwnersWithPreviousScripts(t *testing.T) {
	srv := startServer(t, false)
	ctx := testCtx(t)
	prev := newPrevOwnerless(t, srv.addr())
	s := openSingle(t, srv.addr(), "baton:")
	var held *store.LockHeldError
	grant := func(k, id, owner string) *store.Lease {
		t.Helper()
		l, err := s.Acquire(ctx, &store.AcquireParams{Key: k, LeaseID: id, Holder: "deployer", Owner: owner, TTL: time.Minute})
		if err != nil || l.Owner != owner {
			t.Fatalf("grant of %s to owner %q: %+v, %v", k, owner, l, err)
		}
		return l
	}

	// A lease without an owner: the record of 14 values, shared both ways.
	lib := grant("lib", "lib-1", "")
	if n := prev.values("lib"); n != 14 {
		t.Fatalf("the record of a lease without an owner has %d values, want 14 (as the previous version wrote)", n)
	}
	if v := prev.renewLease("lib", lib.ID); v[0] != "ok" {
		t.Fatalf("previous renewal of the current version's lease without an owner: %v", v)
	}
	if l, err := s.Renew(ctx, &store.RenewParams{Key: "lib", LeaseID: lib.ID, TTL: time.Minute}); err != nil || l.Owner != "" {
		t.Fatalf("renewal after the previous version's: %+v, %v", l, err)
	}
	if v := prev.grant("old", "p1", "deployer", false); v[0] != "new" {
		t.Fatalf("previous grant: %v", v)
	}
	if l, err := s.Get(ctx, "old"); err != nil || l.ID != "p1" || l.Owner != "" {
		t.Fatalf("Get of the previous version's lease: %+v, %v; want p1 without an owner", l, err)
	}
	if l, err := s.Acquire(ctx, &store.AcquireParams{Key: "old", LeaseID: "c1", Holder: "deployer", TTL: time.Minute}); err != nil || l.ID != "p1" {
		t.Fatalf("re-acquire of the previous version's lease by its holder, without an owner: %+v, %v; want p1", l, err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "old", LeaseID: "c2", Holder: "deployer", Owner: "alice", TTL: time.Minute}); !errors.As(err, &held) {
		t.Fatalf("re-acquire of the previous version's lease by its holder as alice: %v, want held", err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "old", LeaseID: "p1", Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renewal of the previous version's lease as alice: %v, want ErrNotHeld", err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "old", LeaseID: "p1"}); err != nil || r.AlreadyReleased {
		t.Fatalf("release of the previous version's lease: %+v, %v", r, err)
	}

	// A lease with an owner: the previous version reads it and refuses other holders.
	a := grant("owned", "a-1", "alice")
	if n := prev.values("owned"); n != 15 {
		t.Fatalf("the record of a lease with an owner has %d values, want 15", n)
	}
	if v := prev.grant("owned", "p2", "other", false); v[0] != "held" || v[1] != a.ID || v[2] != "deployer" || v[3] != int64(a.Token) {
		t.Fatalf("previous grant over a lease with an owner: %v, want held by %s (deployer, token %d)", v, a.ID, a.Token)
	}
	if l, err := s.Get(ctx, "owned"); err != nil || l.Owner != "alice" {
		t.Fatalf("after a refusal by the previous version: %+v, %v; want alice's lease", l, err)
	}
	// Released by the previous version: released for both.
	if v := prev.releaseLease("owned", a.ID); v[0] != "ok" {
		t.Fatalf("previous release of a lease with an owner: %v", v)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "owned", LeaseID: a.ID, Owner: "alice"}); err != nil || !r.AlreadyReleased {
		t.Fatalf("alice's release after the previous version's: %+v, %v; want AlreadyReleased", r, err)
	}
	if b := grant("owned", "b-1", "bob"); b.Token <= a.Token {
		t.Fatalf("grant after the release: token %d, want above %d", b.Token, a.Token)
	}

	// Each rewrite of a live lease by the previous version loses its owner.
	for _, c := range []struct {
		name    string
		rewrite func(k, id string) []any
		want    string
	}{
		{"renewal", func(k, id string) []any { return prev.renewLease(k, id) }, "ok"},
		{"re-acquire by its holder", func(k, id string) []any { return prev.grant(k, "p-"+k, "deployer", false) }, "ok"},
		{"waiter's mark", func(k, id string) []any { return prev.grant(k, "p-"+k, "other", true) }, "held"},
	} {
		k := "lost/" + c.name
		l := grant(k, "a-"+k, "alice")
		if v := c.rewrite(k, l.ID); v[0] != c.want || v[1] != l.ID {
			t.Fatalf("%s by the previous version: %v, want %s naming %s", c.name, v, c.want, l.ID)
		}
		got, err := s.Get(ctx, k)
		if err != nil || got.ID != l.ID || got.Token != l.Token || got.Owner != "" {
			t.Fatalf("after a %s by the previous version: %+v, %v; want lease %s (token %d) without an owner", c.name, got, err, l.ID, l.Token)
		}
		if _, err := s.Renew(ctx, &store.RenewParams{Key: k, LeaseID: l.ID, Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("alice's renewal after a %s by the previous version: %v, want ErrNotHeld", c.name, err)
		}
		if _, err := s.Release(ctx, &store.ReleaseParams{Key: k, LeaseID: l.ID, Owner: "alice"}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("alice's release after a %s by the previous version: %v, want ErrNotHeld", c.name, err)
		}
		if _, err := s.Acquire(ctx, &store.AcquireParams{Key: k, LeaseID: "b-" + k, Holder: "deployer", Owner: "bob", TTL: time.Minute}); !errors.As(err, &held) || held.Token != l.Token {
			t.Fatalf("bob's acquire after a %s by the previous version: %v, want held (token %d)", c.name, err, l.Token)
		}
		if after, err := s.Get(ctx, k); err != nil || after.ID != l.ID || !after.ExpiresAt.Equal(got.ExpiresAt) {
			t.Fatalf("after the refused calls: %+v, %v; want the lease unchanged (%+v)", after, err, got)
		}
	}
}
