package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/internal/batontest"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// TestFailoverTokensNeverGoBack fails a primary over to an asynchronous replica that missed its
// last grants, for real: a cluster of the test's own and a streaming replica (pg_basebackup),
// grants that reach the replica, the replica stopped, grants that do not (the lost ones), the
// primary killed, the replica promoted. A standby is refused. Without the failover guard the
// promoted replica hands out a token the lost grants already carry (the broken variant, shown
// first); with it, it grants nothing during the quarantine, renews the lease that reached it,
// and then hands out tokens above every lost one, which a fence that saw a lost token accepts.
func TestFailoverTokensNeverGoBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	ctx := context.Background()
	primary := batontest.StartPGCluster(t)
	replica := primary.Replica(t)
	const quarantine = 3 * time.Second
	cfg := postgres.Config{FailoverQuarantine: quarantine}
	old, err := postgres.Open(ctx, primary.URL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(s *postgres.Store, key string) *store.Lease {
		t.Helper()
		l, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: key + "-" + time.Now().Format("150405.000000"),
			Holder: "h-" + key, TTL: time.Hour})
		if err != nil {
			t.Fatalf("acquire %s: %v", key, err)
		}
		return l
	}
	kept := grant(old, "kept")
	// A library store on the caller's pool (New), whose DSN names both servers and takes the one
	// that accepts writes, with the failover hook: it follows the failover by itself.
	pc, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port, replica.Port))
	if err != nil {
		t.Fatal(err)
	}
	pc.AfterConnect = postgres.AfterConnect("")
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	lib, err := postgres.New(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	grant(lib, "lib/before")
	for {
		ok, err := primary.CaughtUp(ctx, replica)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling the replica's replay position
	}
	if err := replica.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	// More than 32: PostgreSQL logs a sequence 32 values ahead, so a replica that missed fewer
	// would be ahead of them anyway.
	var lostMax uint64
	for i := range 64 {
		lostMax = max(lostMax, grant(old, fmt.Sprintf("lost/%d", i)).Token)
	}
	old.Close()
	if err := primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := replica.Start(); err != nil {
		t.Fatal(err)
	}
	if s, err := postgres.Open(ctx, replica.URL(), cfg); err == nil {
		s.Close()
		t.Fatal("a store opened on a standby")
	}
	// The broken variant: no guard (from before the promotion: the library store's listener
	// reconnects as soon as it can). The promoted replica's sequence is behind the lost grants.
	postgres.SkipFailoverGuard(true)
	if err := replica.Promote(); err != nil {
		t.Fatal(err)
	}
	bare, err := postgres.Open(ctx, replica.URL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l := grant(bare, "unguarded"); l.Token > lostMax {
		t.Fatalf("without the guard the promoted replica granted token %d, above the lost %d: the test cannot show the hazard", l.Token, lostMax)
	}
	bare.Close()
	postgres.SkipFailoverGuard(false) // after the close: the pool connects lazily

	s, err := postgres.Open(ctx, replica.URL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Acquire(ctx, &store.AcquireParams{Key: "lost/0", LeaseID: "new-a", Holder: "new", TTL: time.Minute})
	var rest *store.RestingError
	if !errors.As(err, &rest) || rest.Reason != store.ReasonFailover || rest.Remaining > quarantine {
		t.Fatalf("a grant right after the failover: %v; want resting (%s) for at most %s", err, store.ReasonFailover, quarantine)
	}
	// The library store's pool drops its connections to the dead primary and connects to the
	// promoted replica: its hook reports the failover to it.
	for {
		_, err := lib.Acquire(ctx, &store.AcquireParams{Key: "lost/1", LeaseID: "lib-1", Holder: "lib", TTL: time.Minute})
		if errors.As(err, &rest) && rest.Reason == store.ReasonFailover {
			break
		}
		if err == nil || errors.Is(err, store.ErrLockHeld) || errors.As(err, &rest) {
			t.Fatalf("the library store (New, AfterConnect) after the failover: %v; want resting (%s)", err, store.ReasonFailover)
		}
		// a connection to the dead primary failing: the pool drops it and connects anew
	}
	if js, err := s.ClaimJobs(ctx, &store.ClaimParams{Kinds: []string{"k"}, Worker: "w", Limit: 1, TTL: time.Minute}); err != nil || len(js) != 0 {
		t.Fatalf("a claim during the quarantine: %v, %v", js, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: kept.Key, LeaseID: kept.ID, TTL: time.Hour}); err != nil {
		t.Fatalf("the renew of a lease the replica has, during the quarantine: %v", err)
	}
	var l *store.Lease
	for {
		l, err = s.Acquire(ctx, &store.AcquireParams{Key: "lost/0", LeaseID: "new-a", Holder: "new", TTL: time.Minute})
		if err == nil {
			break
		}
		if !errors.As(err, &rest) || rest.Reason != store.ReasonFailover {
			t.Fatalf("acquire after the failover: %v", err)
		}
		time.Sleep(rest.Remaining) // the quarantine's own remaining time
	}
	if l.Token <= lostMax || l.Token < 1<<postgres.EpochBits {
		t.Fatalf("after the failover: token %d, want above every lost token (%d) and at least 2^%d", l.Token, lostMax, postgres.EpochBits)
	}
	// A resource fence that saw the lost holder's token accepts the new holder, and refuses the
	// lost holder's late write.
	fs := fence.NewMemoryStore()
	for _, tok := range []uint64{lostMax, l.Token} {
		leave, err := fs.Enter(ctx, "lost/0", tok)
		if err != nil {
			t.Fatalf("fence entry with token %d: %v", tok, err)
		}
		leave()
	}
	if _, err := fs.Enter(ctx, "lost/0", lostMax); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the lost holder's late write: %v, want stale", err)
	}
}
