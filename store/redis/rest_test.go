package redis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// ClearRest on the rests of the earlier layout: an expired lease's lock-delay (the shadow's
// avail) and a release's cooldown (the rest key) are cleared, and the next acquire is granted.
func TestClearRestEarlierLayout(t *testing.T) {
	srv := startServer(t, false)
	ctx := testCtx(t)
	old := newV1(t, srv.addr())
	s := openSingle(t, srv.addr(), "baton:")
	clear := func(key string) *store.Rest {
		t.Helper()
		r, err := s.ClearRest(ctx, &store.ClearRestParams{Key: key, Reason: "test", Actor: "ops"})
		if err != nil {
			t.Fatalf("ClearRest(%s): %v", key, err)
		}
		return r
	}

	// Expired with a minute's lock-delay.
	if _, err := old.grant(ctx, "a", "old-a", time.Minute, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClearRest(ctx, &store.ClearRestParams{Key: "a", Reason: "test"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClearRest of a live lease of the earlier layout: %v, want ErrNotFound", err)
	}
	delKey(t, srv.addr(), "baton:lease:a")
	if r := clear("a"); r.Reason != store.ReasonLockDelay || r.Remaining < 50*time.Second {
		t.Fatalf("ClearRest of an expired lease's lock-delay = %+v", r)
	}
	if _, err := acquire(ctx, s, "a", "n"); err != nil {
		t.Fatalf("acquire after clearing the lock-delay: %v", err)
	}

	// Released with a minute's cooldown by the earlier scripts.
	if _, err := old.grant(ctx, "c", "old-c", time.Minute, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := old.releaseLease(ctx, "c", "old-c"); err != nil || v[0] != "ok" {
		t.Fatalf("release by the earlier scripts: %v, %v", v, err)
	}
	if r := clear("c"); r.Reason != store.ReasonCooldown || r.Remaining < 50*time.Second {
		t.Fatalf("ClearRest of a release's cooldown = %+v", r)
	}
	if _, err := acquire(ctx, s, "c", "n"); err != nil {
		t.Fatalf("acquire after clearing the cooldown: %v", err)
	}
	if _, err := s.ClearRest(ctx, &store.ClearRestParams{Key: "never", Reason: "test"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClearRest of a key never used: %v, want ErrNotFound", err)
	}
}
