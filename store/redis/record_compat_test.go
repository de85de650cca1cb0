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
	load := func(name string) *goredis.Script {
		b, err := os.ReadFile("testdata/record1/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		return goredis.NewScript(string(b))
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return &prevRecord{rdb: rdb, acquire: load("acquire"), release: load("release")}
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
	if _, err := acquire(ctx, s, "k", "c2"); !errors.Is(err, store.ErrCooldown) {
		t.Fatalf("current grant in the cooldown of the previous version's lease: %v, want ErrCooldown", err)
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
	if _, err := acquire(ctx, s, "k2", "c4"); !errors.Is(err, store.ErrCooldown) {
		t.Fatalf("current grant in the cooldown it started through the previous release: %v, want ErrCooldown", err)
	}
}
