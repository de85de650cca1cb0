package redis_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
	batonredis "github.com/batonhq/baton/store/redis"
)

func cmdCalls(t *testing.T, admin *goredis.Client, cmd string) int {
	t.Helper()
	stats, err := admin.Info(testCtx(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// A release or force-release publishes only if a waiting acquire was refused by that lease; the
// publish then wakes a waiter in another store.
func TestPublishOnlyWithWaiters(t *testing.T) {
	srv := startServer(t, false)
	holder := openSingle(t, srv.addr(), "baton:")
	waiter := openSingle(t, srv.addr(), "baton:")
	ctx := testCtx(t)
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	before := cmdCalls(t, admin, "publish")
	for i := range 3 {
		id := "h" + strconv.Itoa(i)
		if _, err := acquire(ctx, holder, "k", id); err != nil {
			t.Fatal(err)
		}
		// A non-waiting refusal marks nothing.
		if _, err := waiter.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "x", TTL: time.Minute}); err == nil {
			t.Fatal("acquire of a held key granted")
		}
		if _, err := holder.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := acquire(ctx, holder, "k", "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ForceRelease(ctx, &store.ForceReleaseParams{Key: "k", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if n := cmdCalls(t, admin, "publish") - before; n != 0 {
		t.Fatalf("releases without waiters published %d times", n)
	}

	for _, force := range []bool{false, true} {
		key := "w" + strconv.FormatBool(force)
		wake, cancel := waiter.Subscribe(key)
		if _, err := acquire(ctx, holder, key, "h"); err != nil {
			t.Fatal(err)
		}
		var held *store.LockHeldError
		for range 2 { // a second refusal keeps the mark
			if _, err := waiter.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "w", Holder: "w", TTL: time.Minute, Wait: true}); !errors.As(err, &held) {
				t.Fatalf("waiting acquire of a held key: %v", err)
			}
		}
		// The holder renewing its lease keeps the mark.
		if _, err := acquire(ctx, holder, key, "h"); err != nil {
			t.Fatal(err)
		}
		if force {
			_, err := holder.ForceRelease(ctx, &store.ForceReleaseParams{Key: key, Reason: "test"})
			if err != nil {
				t.Fatal(err)
			}
		} else if _, err := holder.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: "h"}); err != nil {
			t.Fatal(err)
		}
		wantWake(t, wake, "a release with a waiter")
		cancel()
		// The next grant starts unmarked.
		if force {
			continue
		}
		p0 := cmdCalls(t, admin, "publish")
		if _, err := acquire(ctx, holder, key, "h2"); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: "h2"}); err != nil {
			t.Fatal(err)
		}
		if n := cmdCalls(t, admin, "publish") - p0; n != 0 {
			t.Fatalf("a new lease inherited the previous lease's waiter mark (%d publishes)", n)
		}
	}
}

// Leases and rests written by the previous script version (a shadow without the r field, DEL +
// HSET on release) are honoured: a rolling upgrade keeps cooldowns and lock-delays.
func TestOldFormatShadowKeepsPauses(t *testing.T) {
	srv := startServer(t, false)
	s := openSingle(t, srv.addr(), "baton:")
	ctx := testCtx(t)
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	// Released by the old script with a cooldown: shadow {id, ended=1}, rest key set.
	admin.HSet(ctx, "baton:shadow:a", "id", "old", "ended", "1")
	admin.Set(ctx, "baton:rest:a", "cooldown", 10*time.Second)
	var cd *store.RestingError
	if _, err := acquire(ctx, s, "a", "n"); !errors.As(err, &cd) || cd.Reason != "cooldown" {
		t.Fatalf("acquire during an old release's cooldown: %v", err)
	}
	if r, err := s.Release(ctx, &store.ReleaseParams{Key: "a", LeaseID: "old"}); err != nil || !r.AlreadyReleased {
		t.Fatalf("second release of an old-format release: %+v, %v", r, err)
	}
	// Force-released by the old script with a lock-delay: shadow {id, ended=2}, rest key set.
	admin.HSet(ctx, "baton:shadow:b", "id", "old", "ended", "2")
	admin.Set(ctx, "baton:rest:b", "lock-delay", 10*time.Second)
	if _, err := acquire(ctx, s, "b", "n"); !errors.As(err, &cd) || cd.Reason != "lock-delay" {
		t.Fatalf("acquire during an old force-release's lock-delay: %v", err)
	}
	// Expired under the old script: shadow {id, ended=0, avail} and no lease.
	avail := time.Now().Add(10 * time.Second).UnixMilli()
	admin.HSet(ctx, "baton:shadow:c", "id", "old", "ended", "0", "avail", avail)
	if _, err := acquire(ctx, s, "c", "n"); !errors.As(err, &cd) || cd.Reason != "lock-delay" {
		t.Fatalf("acquire during an old expiry's lock-delay: %v", err)
	}
	// A new release with a cooldown, then the rest ends: the next grant does not take over.
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "d", LeaseID: "d1", Holder: "d1", TTL: time.Minute, Cooldown: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "d", LeaseID: "d1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, s, "d", "d2"); !errors.As(err, &cd) || cd.Reason != "cooldown" {
		t.Fatalf("acquire during a cooldown: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	l, err := acquire(ctx, s, "d", "d2")
	if err != nil || l.TookOver {
		t.Fatalf("acquire after the cooldown: %+v, %v", l, err)
	}
}

// A grant refused because the counter is below the floor leaves the counter unchanged.
func TestResetRefusalLeavesCounter(t *testing.T) {
	srv := startServer(t, false)
	s, err := batonredis.Open(testCtx(t), batonredis.Config{Addr: srv.addr(), TrustServerChange: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)
	l, err := acquire(ctx, s, "k", "a")
	if err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	admin.Set(ctx, "baton:token", 0, 0) // the counter lost (as after a restart)
	if _, err := acquire(ctx, s, "k2", "b"); !errors.Is(err, batonredis.ErrTokensReset) {
		t.Fatalf("grant with the counter below the floor: %v", err)
	}
	if v, _ := admin.Get(ctx, "baton:token").Int64(); v != 0 {
		t.Fatalf("counter after a refused grant: %d, want 0", v)
	}
	admin.Set(ctx, "baton:token", l.Token, 0)
	l2, err := acquire(ctx, s, "k2", "b")
	if err != nil || l2.Token != l.Token+1 {
		t.Fatalf("grant at the floor: %+v, %v", l2, err)
	}
}
