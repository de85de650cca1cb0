package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// A waiter that queued while the key was held, and then waits for push only, is woken by the
// release of the lease granted to the waiter before it: that grant saw its ticket and recorded
// that someone waits (the release reads the front only then), and the NOTIFY reaches it in
// another process.
func TestGrantRecordsWaitersForTheNextRelease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s1, s2 := openStore(t, schema), openStore(t, schema)
	const key = "line/next-release"
	waiting := func(holder string) *store.AcquireParams {
		return &store.AcquireParams{Key: key, LeaseID: holder + "-" + randHex(), Holder: holder, TTL: time.Hour, Wait: true}
	}
	hold, err := s1.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	first, second := waiting("first"), waiting("second")
	for _, p := range []*store.AcquireParams{first, second} {
		if _, err := s1.Acquire(ctx, p); !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("waiting acquire of %s: %v; want ErrLockHeld, its ticket enqueued", p.Holder, err)
		}
	}
	// Both wait in s2: a NOTIFY naming a waiter that s2 does not know would wake another.
	wakeFirst, cancelFirst := s2.SubscribeAs(key, first.LeaseID)
	defer cancelFirst()
	wakeSecond, cancel := s2.SubscribeAs(key, second.LeaseID)
	defer cancel()
	if _, err := s1.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: hold.ID}); err != nil {
		t.Fatal(err)
	}
	wantWake(t, wakeFirst, "the holder's release, for the front ticket's waiter")
	l, err := s1.Acquire(ctx, first)
	if err != nil {
		t.Fatalf("the front's acquire after the release: %v", err)
	}
	select {
	case <-wakeSecond:
		t.Fatal("the holder's release woke the second in line; the test cannot tell the next release's wake-up from it")
	default:
	}
	if _, err := s1.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakeSecond:
	case <-ctx.Done():
		t.Fatalf("second, subscribed on another store, not woken %s after first released: no NOTIFY", hangGuard)
	}
	if l, err := s2.Acquire(ctx, second); err != nil || l.Holder != "second" {
		t.Fatalf("second's acquire once woken: %+v, %v; want granted", l, err)
	}
}

// An acquire that waits for the key's row while a job on the key ends does not overtake the
// resource's next job: the job's end makes that job the head in the same transaction, which the
// acquire's snapshot, taken before, does not show. The test holds the row in a transaction of its
// own, so that the job's end, then the acquire, queue behind it in that order.
func TestAcquireWaitingThroughAJobsEndDoesNotOvertakeTheNextJob(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s := openStore(t, schema)
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "apply"}}); err != nil {
		t.Fatal(err)
	}
	const key = "line/snapshot"
	l, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "once", Holder: "once", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	release := func(id string) {
		t.Helper()
		if _, err := s.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: id}); err != nil {
			t.Fatal(err)
		}
	}
	release(l.ID) // the key is a lock key: a job's attempt holds its row
	submit(t, s, "apply", key)
	next := submit(t, s, "apply", key)
	running := claim(t, s, 1, "apply")
	if len(running) != 1 {
		t.Fatalf("claimed %d jobs; want the first", len(running))
	}

	conn, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT FROM `+pgx.Identifier{schema, "leases"}.Sanitize()+` WHERE key = $1 FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	// blocked waits until n of this schema's statements wait for a lock.
	blocked := func(n int64) {
		t.Helper()
		for queryInt(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> $1
			AND position($2 in query) > 0`, conn.PgConn().PID(), schema) < n {
			if ctx.Err() != nil {
				t.Fatalf("fewer than %d statements wait for the key's row", n)
			}
			time.Sleep(5 * time.Millisecond) // polling pg_stat_activity
		}
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.CompleteJob(ctx, &store.CompleteParams{ID: running[0].ID, Token: running[0].Token})
		ended <- err
	}()
	blocked(1)
	acquired := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "late", Holder: "late", TTL: time.Minute})
		acquired <- err
	}()
	blocked(2)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatalf("completing the running job: %v", err)
	}
	err = <-acquired
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Holder != fmt.Sprint("job:", next.ID) {
		release("late")
		t.Fatalf("acquire that waited through the job's end: %v; want ErrLockHeld, job %d first", err, next.ID)
	}
	if js := claim(t, s, 1, "apply"); len(js) != 1 || js[0].ID != next.ID {
		t.Fatalf("claimed %v after the refused acquire; want job %d", js, next.ID)
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

// The cleaner deletes the line's expired tickets (abandoned waits) and keeps live ones. The
// database's clock cannot be moved, so the test moves the abandoned ticket's expiry back.
func TestCleanDeletesExpiredTickets(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s := openStore(t, schema)
	const key = "line/clean"
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gone", "live"} {
		_, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: id, TTL: time.Hour, Wait: true})
		if !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("waiting acquire of %s: %v; want ErrLockHeld, its ticket enqueued", id, err)
		}
	}
	tickets := pgx.Identifier{schema, "tickets"}.Sanitize()
	exec(t, `UPDATE `+tickets+` SET expires_at = now() - interval '1 second' WHERE lease_id = 'gone'`)
	if _, err := s.CleanJobs(ctx, &store.CleanParams{Age: time.Hour, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, `SELECT count(*) FROM `+tickets+` WHERE lease_id = 'gone'`); n != 0 {
		t.Fatalf("the expired ticket is still there after cleaning")
	}
	if n := queryInt(t, `SELECT count(*) FROM `+tickets+` WHERE lease_id = 'live'`); n != 1 {
		t.Fatalf("the live ticket was deleted by cleaning")
	}
}

// Open's pool runs with JIT off and generic plans (docs/guarantees.md), unless the DSN says.
func TestOpenSetsJITOffAndGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, newSchema(t))
	for setting, want := range map[string]string{"jit": "off", "plan_cache_mode": "force_generic_plan"} {
		var got string
		if err := s.Pool().QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s on the store's connections: %q, want %q", setting, got, want)
		}
	}
}

// The cleaner deletes holds that ended longer ago than the age and the longest rest, and keeps
// live ones. The database's clock cannot be moved: the test moves the old hold's expiry back.
func TestCleanDeletesOldHolds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s := openStore(t, schema)
	for _, id := range []string{"old", "live"} {
		if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "holds/" + id, LeaseID: id, Holder: id, TTL: time.Hour, Shared: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "holds/old", LeaseID: "old"}); err != nil {
		t.Fatal(err)
	}
	holds := pgx.Identifier{schema, "holds"}.Sanitize()
	exec(t, `UPDATE `+holds+` SET expires_at = now() - interval '1 hour' - $1::bigint * interval '1 millisecond' WHERE lease_id = 'old'`,
		store.MaxRest.Milliseconds())
	if _, err := s.CleanJobs(ctx, &store.CleanParams{Age: time.Hour, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, `SELECT count(*) FROM `+holds+` WHERE lease_id = 'old'`); n != 0 {
		t.Fatalf("the old hold is still there after cleaning")
	}
	if n := queryInt(t, `SELECT count(*) FROM `+holds+` WHERE lease_id = 'live'`); n != 1 {
		t.Fatalf("the live hold was deleted by cleaning")
	}
}
