package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
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

// A schema audited before the line (version 10, audit triggers enabled) records the line's
// tickets once migrated: migration 0011 creates the ticket triggers itself. The store that
// migrates it does not enable audit, so that only the migration can have made them.
func TestMigrationToTicketsKeepsAuditing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.MigrateTo(ctx, pool, schema, 10); err != nil {
		t.Fatal(err)
	}
	if err := postgres.EnableAudit(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	const triggers = `SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND t.tgname LIKE $2`
	if n := queryInt(t, triggers, schema, "%audit%"); n != 3 {
		t.Fatalf("%d audit triggers at version 10; want 3 (leases and jobs)", n)
	}

	s, err := postgres.Open(ctx, dsn(), postgres.Config{Schema: schema}) // migrates to the latest; Audit off
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if n := queryInt(t, triggers, schema, "tickets_audit_%"); n != 2 {
		t.Errorf("%d ticket audit triggers after migrating the audited schema; want 2 (insert, update)", n)
	}
	const key = "line/audited"
	hold, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w := &store.AcquireParams{Key: key, LeaseID: "waiter", Holder: "waiter", TTL: time.Hour, Wait: true}
	if _, err := s.Acquire(ctx, w); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("waiting acquire: %v; want ErrLockHeld, its ticket enqueued", err)
	}
	// The same waiter turned break-glass: its ticket is moved to the front (the update trigger).
	w.First, w.FirstReason = true, "incident 7"
	if _, err := s.Acquire(ctx, w); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("break-glass acquire: %v; want ErrLockHeld, its ticket put first", err)
	}
	events, err := s.Events(ctx, &store.EventsParams{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s %s %s %q", e.Kind, e.LeaseID, e.Actor, e.Reason))
	}
	want := []string{`acquire holder holder ""`, `ticket_enqueue waiter waiter ""`, `ticket_first waiter waiter "incident 7"`}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("audit log of %s:\n got %q\nwant %q", key, got, want)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: hold.ID}); err != nil {
		t.Fatal(err)
	}
}
