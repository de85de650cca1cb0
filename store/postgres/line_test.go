package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// LeaveLine by the front ticket's waiter, on a free key, wakes the next waiter by NOTIFY in every
// process: here a waiter subscribed (SubscribeAs) on another store, whose hub nothing else
// reaches. A subscription has no poll of its own: only the push can wake it before the test's
// hang guard, while every ticket and the holder's lease would last an hour.
func TestLeaveLineNotifiesTheNextWaiterElsewhere(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s1, s2 := openStore(t, schema), openStore(t, schema)
	const key = "line/leave"
	waiting := func(holder string) *store.AcquireParams {
		return &store.AcquireParams{Key: key, LeaseID: holder + "-" + randHex(), Holder: holder, TTL: time.Hour, Wait: true}
	}
	hold, err := s1.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	front, next := waiting("front"), waiting("next")
	for _, p := range []*store.AcquireParams{front, next} {
		if _, err := s1.Acquire(ctx, p); !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("waiting acquire of %s: %v; want ErrLockHeld, its ticket enqueued", p.Holder, err)
		}
	}
	wakeFront, cancelFront := s2.SubscribeAs(key, front.LeaseID)
	defer cancelFront()
	wakeNext, cancelNext := s2.SubscribeAs(key, next.LeaseID)
	defer cancelNext()

	// The release wakes the front ticket's waiter by name, and only it.
	if _, err := s1.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: hold.ID}); err != nil {
		t.Fatal(err)
	}
	wantWake(t, wakeFront, "the release, for the front ticket's waiter")
	select {
	case <-wakeNext:
		t.Fatal("the release woke the second in line; the test cannot tell LeaveLine's wake-up from it")
	default: // the release's one NOTIFY has been handled
	}

	// The front gives up on s1: its NOTIFY, handled by s2's listener, wakes next.
	if err := s1.LeaveLine(ctx, key, front.LeaseID, front.Owner); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakeNext:
	case <-ctx.Done():
		t.Fatalf("next, subscribed on another store, not woken %s after the front left the line: no NOTIFY", hangGuard)
	}
	if l, err := s2.Acquire(ctx, next); err != nil || l.Holder != "next" {
		t.Fatalf("next's acquire once woken: %+v, %v; want granted, the front has left", l, err)
	}
}
