package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// ClearRest: an admin ends a key's cooldown (after a release) or lock-delay (after an expiry or
// a force-release) early; the next acquire is granted at once. A free or held key has no rest
// to clear (ErrNotFound), and a held key keeps its lease.
func testClearRest(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	admin := func(key string) *store.ClearRestParams {
		return &store.ClearRestParams{Key: key, Reason: "node fixed by hand", Actor: "ops"}
	}
	if _, err := e.store.ClearRest(e.ctx, admin("rest-never")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClearRest on a key never used: %v, want ErrNotFound", err)
	}
	if _, err := e.store.ClearRest(e.ctx, &store.ClearRestParams{Key: "rest-never"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("ClearRest without a reason: %v, want ErrInvalidArgument", err)
	}

	// Cooldown after a clean release.
	a := e.acquire("rest-cool", baton.WithCooldown(time.Hour))
	if _, err := e.store.ClearRest(e.ctx, admin("rest-cool")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClearRest on a held key: %v, want ErrNotFound", err)
	}
	if l, err := e.store.Get(e.ctx, "rest-cool"); err != nil || l.ID != a.ID {
		t.Fatalf("ClearRest on a held key changed its lease: %+v, %v", l, err)
	}
	if err := a.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.locker.TryAcquire(e.ctx, "rest-cool"); !errors.Is(err, baton.ErrResting) {
		t.Fatalf("TryAcquire after a release with a 1h cooldown: %v, want ErrResting", err)
	}
	rest, err := e.store.ClearRest(e.ctx, admin("rest-cool"))
	if err != nil {
		t.Fatalf("ClearRest during the cooldown: %v", err)
	}
	if rest.Key != "rest-cool" || rest.Reason != store.ReasonCooldown || rest.Remaining <= 50*time.Minute || rest.Remaining > time.Hour {
		t.Fatalf("ClearRest = %+v, want the cooldown with about 1h left", rest)
	}
	b, err := e.locker.TryAcquire(e.ctx, "rest-cool")
	if err != nil {
		t.Fatalf("TryAcquire after ClearRest: %v, want a grant", err)
	}
	if caps := e.store.Capabilities(); caps.FencingTokens && b.Token <= a.Token {
		t.Fatalf("token %d after %d", b.Token, a.Token)
	}
	if _, err := e.store.ClearRest(e.ctx, admin("rest-cool")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClearRest on the re-granted key: %v, want ErrNotFound", err)
	}
	if err := b.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ClearRest(e.ctx, admin("rest-cool")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClearRest after a release without cooldown: %v, want ErrNotFound", err)
	}

	// Lock-delay after a force-release.
	e.acquire("rest-delay", baton.WithLockDelay(time.Hour))
	if _, err := e.locker.ForceRelease(e.ctx, "rest-delay", "wedged"); err != nil {
		t.Fatal(err)
	}
	rest, err = e.store.ClearRest(e.ctx, admin("rest-delay"))
	if err != nil || rest.Reason != store.ReasonLockDelay || rest.Remaining <= 50*time.Minute {
		t.Fatalf("ClearRest during the lock-delay = %+v, %v; want the lock-delay with about 1h left", rest, err)
	}
	c, err := e.locker.TryAcquire(e.ctx, "rest-delay")
	if err != nil {
		t.Fatalf("TryAcquire after clearing the lock-delay: %v", err)
	}
	_ = c.Release(e.ctx)

	if !e.store.Capabilities().Audit {
		return
	}
	events, err := e.store.Events(e.ctx, &store.EventsParams{Key: "rest-cool"})
	if err != nil {
		t.Fatal(err)
	}
	var cleared []*store.Event
	for _, ev := range events {
		if ev.Kind == store.EventClearRest {
			cleared = append(cleared, ev)
		}
	}
	if len(cleared) != 1 || cleared[0].Actor != "ops" || cleared[0].Reason != "node fixed by hand" || cleared[0].LeaseID != a.ID || cleared[0].Token != a.Token {
		t.Fatalf("audit log of rest-cool has clear_rest events %+v, want one by ops for lease %s", cleared, a.ID)
	}
}
