package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// Trees on PostgreSQL (trees.go, trees_grant.go): what the conformance cases cannot see from one
// store, two stores on one schema (two processes, two pools) see.

// setTree opts prefix into a tree through s.
func setTree(t *testing.T, s *postgres.Store, prefix string) {
	t.Helper()
	if _, err := s.SetTree(testCtx(t), &store.SetTreeParams{Prefix: prefix, Actor: "test"}); err != nil {
		t.Fatalf("SetTree(%q): %v", prefix, err)
	}
}

// TestTreeRelatedRace: a parent and its child are asked for at the same instant, many times,
// from two stores (each its own pool): exactly one of the two is granted each time, in either
// mode pair that conflicts, and two siblings are both granted. Both grants lock the parent's
// row (FOR UPDATE by the parent's, FOR SHARE by the child's), so the second reads the first's
// hold; without that lock both would read the other as free.
func TestTreeRelatedRace(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	setTree(t, a, "race/")
	ctx := testCtx(t)
	const rounds = 150
	type ask struct {
		s      *postgres.Store
		key    string
		shared bool
	}
	try := func(x ask, i int) (*store.Lease, error) {
		return x.s.Acquire(ctx, &store.AcquireParams{Key: x.key, LeaseID: fmt.Sprintf("%s-%d-%v", x.key, i, x.shared),
			Holder: "h-" + x.key, TTL: time.Minute, Shared: x.shared})
	}
	pairs := []struct {
		one, two  ask
		bothGrant bool
	}{
		{ask{a, "race/p", false}, ask{b, "race/p/c", false}, false},
		{ask{b, "race/q", true}, ask{a, "race/q/c/d", false}, false},
		{ask{a, "race", false}, ask{b, "race/r/c", true}, false},
		{ask{a, "race/s/x", false}, ask{b, "race/s/y", false}, true},
	}
	for i := range rounds {
		for _, pr := range pairs {
			var wg sync.WaitGroup
			start := make(chan struct{})
			got := make([]*store.Lease, 2)
			errs := make([]error, 2)
			for j, x := range []ask{pr.one, pr.two} {
				wg.Go(func() {
					<-start
					got[j], errs[j] = try(x, i)
				})
			}
			close(start)
			wg.Wait()
			n := 0
			for j, err := range errs {
				var held *store.LockHeldError
				switch {
				case err == nil:
					n++
				case !errors.As(err, &held):
					t.Fatalf("round %d: %s: %v", i, []ask{pr.one, pr.two}[j].key, err)
				}
			}
			switch {
			case pr.bothGrant && n != 2:
				t.Fatalf("round %d: siblings %q and %q: %d granted (%v); want both", i, pr.one.key, pr.two.key, n, errs)
			case !pr.bothGrant && n != 1:
				t.Fatalf("round %d: related %q and %q: %d granted (%v); want exactly one", i, pr.one.key, pr.two.key, n, errs)
			}
			for j, l := range got {
				if l == nil {
					continue
				}
				s := []ask{pr.one, pr.two}[j].s
				if _, err := s.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID, Holds: true}); err != nil {
					t.Fatalf("round %d: Release(%q): %v", i, l.Key, err)
				}
			}
		}
	}
}

// TestTreeStaleProcess: a store that read the trees before another set one (its copy in memory
// is stale) still grants by the tree's rules: its plain statement refuses the key of a tree,
// and it goes the way of holds. Its jobs on the tree's keys are granted by them too.
func TestTreeStaleProcess(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	ctx := testCtx(t)
	// b knew "stale/x" as a flat key before the tree.
	l, err := b.Acquire(ctx, acquireParams("stale/x", "early"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	setTree(t, a, "stale/")
	parent, err := a.Acquire(ctx, acquireParams("stale/x", "parent"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"stale/x/y", "stale/x/new/z", "stale"} {
		_, err := b.Acquire(ctx, acquireParams(k, "child"))
		var held *store.LockHeldError
		if !errors.As(err, &held) || held.Related != "stale/x" || held.Token != parent.Token {
			t.Fatalf("%q from the stale store while its ancestor or descendant is held: %v; want refused naming stale/x", k, err)
		}
	}
	if _, err := b.Acquire(ctx, acquireParams("stale//bad", "child")); !isInvalid(err, "key") {
		t.Fatalf("a key with an empty level from the stale store: %v; want invalid key", err)
	}
	if _, err := a.Release(ctx, &store.ReleaseParams{Key: parent.Key, LeaseID: parent.ID}); err != nil {
		t.Fatal(err)
	}
	c, err := b.Acquire(ctx, acquireParams("stale/x/y", "child"))
	if err != nil {
		t.Fatalf("the child once its parent was released: %v", err)
	}
	if _, err := a.Acquire(ctx, acquireParams("stale/x", "parent")); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("the parent while b holds its child: %v; want ErrLockHeld", err)
	}
	if _, err := b.Release(ctx, &store.ReleaseParams{Key: c.Key, LeaseID: c.ID}); err != nil {
		t.Fatal(err)
	}
}

// TestTreeWakePush: the end of a hold in a tree pushes a wake-up to the front of each related
// line, across processes (NOTIFY from the releasing store, heard by the waiting one): a waiting
// parent request when its child is released, a waiting grandchild request when its grandparent
// is, and a waiting lease below a job's resource when the job completes. The waiters subscribe
// to the store itself, which never polls: only a push fires the subscription. (A Locker's waiter
// also retries to keep its ticket alive, every third of its TTL, which would hide a lost push.)
func TestTreeWakePush(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	setTree(t, a, "w/")
	ctx := testCtx(t)
	if err := a.RegisterKinds(ctx, []store.Kind{{Name: "fix"}}); err != nil {
		t.Fatal(err)
	}
	hold := func(key string) *store.Lease {
		t.Helper()
		l, err := a.Acquire(ctx, acquireParams(key, "holder"))
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		return l
	}
	// wait enqueues a waiting request for key in b, refused by a related holder, and subscribes
	// to its wake-up.
	wait := func(key string) (<-chan struct{}, func()) {
		t.Helper()
		id := "waiter-" + key
		_, err := b.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "waiter", TTL: time.Hour, Wait: true})
		var held *store.LockHeldError
		if !errors.As(err, &held) || held.Related == "" {
			t.Fatalf("the waiter on %q: %v; want refused by a related holder", key, err)
		}
		return b.SubscribeAs(key, id)
	}
	pushed := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second): // no poll can fire it: only a lost push reaches this
			t.Fatalf("no wake-up pushed after %s", what)
		}
	}
	child := hold("w/a/b")
	ch, stop := wait("w/a")
	if _, err := a.Release(ctx, &store.ReleaseParams{Key: child.Key, LeaseID: child.ID}); err != nil {
		t.Fatal(err)
	}
	pushed(ch, "the child's release")
	stop()
	grand := hold("w/g")
	ch, stop = wait("w/g/x/y")
	if _, err := a.Release(ctx, &store.ReleaseParams{Key: grand.Key, LeaseID: grand.ID}); err != nil {
		t.Fatal(err)
	}
	pushed(ch, "the grandparent's release")
	stop()
	if _, err := a.SubmitJob(ctx, &store.SubmitParams{Kind: "fix", Resource: "w/j"}); err != nil {
		t.Fatal(err)
	}
	js, err := a.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"fix"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(js) != 1 || !js[0].Tree {
		t.Fatalf("ClaimJobs: %+v, %v; want the job, in a tree", js, err)
	}
	ch, stop = wait("w/j/x")
	defer stop()
	if _, err := a.CompleteJob(ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token}); err != nil {
		t.Fatal(err)
	}
	pushed(ch, "the job's completion")
}

// A grant in a tree reads its related keys with index lookups (its ancestors by key) and one
// range of each index for its descendants, under the store's generic plans: never a scan of the
// tree, however many keys it holds.
func TestTreeRelatedPlanReadsIndexRanges(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema)
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// A large tree, mostly ended holds, old tickets and finished jobs.
	exec(t, `INSERT INTO `+id("holds")+` (lease_id, key, mode, lease_key, holder, token, acquired_at, expires_at, ended, cooldown_ms, lock_delay_ms)
		SELECT 'l' || i, 't/' || (i % 100) || '/' || i, 'exclusive', 't/' || (i % 100) || '/' || i, 'h', i, now(), now(), 1, 0, 0
		FROM generate_series(1, 20000) AS i`)
	exec(t, `INSERT INTO `+id("tickets")+` (key, lease_id, holder, created_at, expires_at)
		SELECT 't/' || (i % 100) || '/' || i, 'l' || i, 'h', now(), now() - interval '1 hour' FROM generate_series(1, 20000) AS i`)
	exec(t, `INSERT INTO `+id("resources")+` (key) SELECT 't/' || (i % 100) || '/' || i FROM generate_series(1, 20000) AS i`)
	exec(t, `INSERT INTO `+id("jobs")+` (seq, kind, resource, state, max_attempts, scheduled_at)
		SELECT i, 'k', 't/' || (i % 100) || '/' || i, 'succeeded', 3, now() FROM generate_series(1, 20000) AS i`)
	exec(t, `INSERT INTO `+id("leases")+` (key, lease_id, holder, token, acquired_at, expires_at, ended, available_at, cooldown_ms, lock_delay_ms)
		SELECT 't/' || (i % 100) || '/' || i, '', 'h', i, now(), now(), 1, now(), 0, 0 FROM generate_series(1, 20000) AS i`)
	exec(t, `ANALYZE `+id("holds")+`, `+id("tickets")+`, `+id("jobs")+`, `+id("leases"))
	_, plan := genericPlan(t, "related", postgres.RelatedSQL(schema),
		`(ARRAY['t/7', 't'], 't/7/x/', 't/7/x0', now(), false, 'me', false, now(), 0, now())`)
	t.Logf("%s", plan)
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("the related keys' plan scans a table:\n%s", plan)
	}
	for _, w := range []string{"holds_by_key", "tickets_line", "jobs_unfinished_by_resource"} {
		if !strings.Contains(plan, w) {
			t.Errorf("plan lacks %q:\n%s", w, plan)
		}
	}
}

// TestTreeRatedPrefixStaleProcess: a store that granted a tree key in one round trip before
// another set a rate on a prefix above it (its copy of the rated prefixes is stale) counts the
// rate: the one-round-trip statement hands a key under a rated prefix back to the holds'
// transaction, which counts it.
func TestTreeRatedPrefixStaleProcess(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	ctx := testCtx(t)
	setTree(t, a, "rt/")
	cycle := func(holder string) error {
		l, err := b.Acquire(ctx, acquireParams("rt/a/x", holder))
		if err != nil {
			return err
		}
		_, err = b.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID})
		return err
	}
	if err := cycle("before"); err != nil { // b now knows the tree, and no rated prefix
		t.Fatal(err)
	}
	if _, err := a.SetPrefixRate(ctx, &store.SetPrefixRateParams{Prefix: "rt/a/", Rate: store.Rate{Max: 1, Window: time.Hour}, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := cycle("first"); err != nil {
		t.Fatalf("the first grant under the rate 1/1h: %v", err)
	}
	var rest *store.RestingError
	if err := cycle("second"); !errors.As(err, &rest) || rest.Reason != store.ReasonRate {
		t.Fatalf("the second grant under the rate 1/1h from the stale store: %v; want refused for the rate", err)
	}
}

// TestTreeReleaseNotifiesOnlyMarked: the release of a lease on a tree key that nobody waits for
// sends no NOTIFY (a notifying commit serialises on the database's queue of notifications); one
// that a waiter was refused by wakes a subscriber of the key even once the waiter's ticket is gone
// (the waiter marked the key's row, as it marks a plain lease).
func TestTreeReleaseNotifiesOnlyMarked(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	setTree(t, s, "tn/")
	ctx := testCtx(t)
	channel := postgres.ChannelName(schema)
	lis, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close(ctx)
	if _, err := lis.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// The first NOTIFY after a grant and release of tn/a/b: a sentinel sent after the release
	// committed, unless the release sent one (notifications arrive in commit order).
	nextAfterCycle := func(key, leaseID string) string {
		t.Helper()
		l, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: leaseID, Holder: "h", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: l.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := lis.Exec(ctx, "SELECT pg_notify($1, 'sentinel')", channel); err != nil {
			t.Fatal(err)
		}
		n, err := lis.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Payload != "sentinel" {
			// Drain to the sentinel, for the next round.
			for m := n; m.Payload != "sentinel"; {
				if m, err = lis.WaitForNotification(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		return n.Payload
	}
	for i := range 3 {
		if got := nextAfterCycle("tn/a/b", fmt.Sprintf("quiet-%d", i)); got != "sentinel" {
			t.Fatalf("round %d: a release nobody waited for sent NOTIFY %q", i, got)
		}
	}

	// A waiter refused by the holder, whose ticket is then gone: the release still wakes the key.
	holder, err := s.Acquire(ctx, &store.AcquireParams{Key: "tn/a/b", LeaseID: "held", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(ctx, &store.AcquireParams{Key: "tn/a/b", LeaseID: "waiter", Holder: "w", TTL: time.Minute, Wait: true})
	if !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("waiting Acquire of a held key: %v; want ErrLockHeld", err)
	}
	exec(t, "DELETE FROM "+pgx.Identifier{schema, "tickets"}.Sanitize()+" WHERE lease_id = 'waiter'")
	woken, cancel := s.Subscribe("tn/a/b")
	defer cancel()
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "tn/a/b", LeaseID: holder.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-ctx.Done():
		t.Fatal("the release of a key a waiter was refused by woke no subscriber of the key")
	}
	// Other processes are told too: the key's NOTIFY comes before a sentinel sent now.
	if _, err := lis.Exec(ctx, "SELECT pg_notify($1, 'sentinel')", channel); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "sentinel" {
		n, err := lis.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, n.Payload)
	}
	if !slices.Contains(seen, "tn/a/b") {
		t.Fatalf("NOTIFYs after the release a waiter was refused by: %q; want the key's", seen)
	}
	// The next grant finds nobody waiting: its release is quiet again.
	if got := nextAfterCycle("tn/a/b", "quiet-after"); got != "sentinel" {
		t.Fatalf("a release nobody waited for, after a waiter left, sent NOTIFY %q", got)
	}
}

// TestTreeFirstGrantsRace: a parent and its child asked for at once, each for the first time
// (neither has a row yet), are never both granted. The one-round-trip grant locks the rows it
// finds; a row that another request creates between that lock and the grant's reads must send
// it to the holds' transaction, or it decides on rows it never locked.
func TestTreeFirstGrantsRace(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	ctx := testCtx(t)
	setTree(t, a, "race/")
	for i := range 150 {
		parent := fmt.Sprintf("race/p%d", i)
		keys := []string{parent, parent + "/c", parent + "/c/d"}
		var wg sync.WaitGroup
		granted := make([]bool, len(keys))
		for j, k := range keys {
			s := a
			if j%2 == 1 {
				s = b
			}
			wg.Go(func() {
				_, err := s.Acquire(ctx, acquireParams(k, fmt.Sprintf("h%d", j)))
				switch {
				case err == nil:
					granted[j] = true
				case !errors.Is(err, store.ErrLockHeld) && !errors.Is(err, store.ErrResting):
					t.Errorf("Acquire(%q): %v", k, err)
				}
			})
		}
		wg.Wait()
		n := 0
		for _, g := range granted {
			if g {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("round %d: %v of %v granted at once; a parent and its descendants exclude each other", i, granted, keys)
		}
	}
}

// TestTreeOneRoundTripDecides: once a tree key's rows exist, its exclusive grant is decided by
// the one-round-trip statement (granted, then refused while held), not handed back to the
// holds' transaction; a key whose rows do not exist yet is handed back.
func TestTreeOneRoundTripDecides(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := testCtx(t)
	setTree(t, s, "one/")
	if decided, _, err := s.TreeOneOutcome(ctx, acquireParams("one/a/b", "first"), "one/"); err != nil || decided {
		t.Fatalf("a key without rows: decided %v, %v; want handed back", decided, err)
	}
	l, err := s.Acquire(ctx, acquireParams("one/a/b", "maker")) // makes the rows
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	decided, got, err := s.TreeOneOutcome(ctx, acquireParams("one/a/b", "fast"), "one/")
	if err != nil || !decided || got == nil {
		t.Fatalf("a key whose rows exist: decided %v, lease %v, %v; want granted in one round trip", decided, got, err)
	}
	if decided, _, err := s.TreeOneOutcome(ctx, acquireParams("one/a", "parent"), "one/"); !decided || !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("its parent while it is held: decided %v, %v; want refused in one round trip", decided, err)
	}
}
