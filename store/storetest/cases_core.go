package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// testMutualExclusion makes up to 32 x 500 attempts, fewer (but at least MinAttemptsWithin per
// goroutine) when they take more than exclusionBudget: with -race on a loaded machine a slow
// backend (etcd: a raft round per grant and release) would otherwise run into the test's
// deadline.
func testMutualExclusion(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	stats, err := CheckExclusionWithin(e.ctx, e.store, 32, 500, 4, exclusionBudget)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Attempts < 32*MinAttemptsWithin || stats.Grants+stats.Held != stats.Attempts {
		t.Fatalf("attempts %d, grants %d, held %d: some attempts unaccounted for", stats.Attempts, stats.Grants, stats.Held)
	}
	if stats.Held == 0 {
		t.Fatalf("no attempt ever met a held key (%d grants): the test did not create contention", stats.Grants)
	}
	t.Logf("%d attempts: %d grants, %d found the key held", stats.Attempts, stats.Grants, stats.Held)
}

// exclusionBudget bounds the time MutualExclusion spends starting attempts; it is well below
// newEnv's deadline. A store that grants a held key, always or only when two acquirers race
// between its check and its write, fails within the first hundred attempts (32 goroutines on
// 4 keys collide from the start; TestChecksCatchBrokenStores runs both variants with these
// parameters): ten seconds, over a thousand attempts with -race on SQLite, leave a wide margin.
const exclusionBudget = 10 * time.Second

func testTokenRealTimeOrder(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().FencingTokens, "the backend documents that it cannot promise fencing tokens")
	n, err := CheckTokenOrder(e.ctx, e.store, 16, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d grants: too few to check ordering", n)
	}
}

func testTokensAcrossHandovers(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().FencingTokens, "the backend documents that it cannot promise fencing tokens")
	const key = "tokens"
	var last uint64
	next := func(how string, l *baton.Lease) {
		t.Helper()
		if l.Token <= last {
			t.Fatalf("after %s: token %d, not greater than %d", how, l.Token, last)
		}
		last = l.Token
	}
	// Release.
	l := e.acquire(key)
	next("first acquire", l)
	if err := l.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	l = e.acquire(key, baton.WithTTL(time.Second), baton.WithKeepalive(false))
	next("release", l)
	// Expiry takeover: a waiter gets the key once the TTL has passed.
	l2, err := e.locker.Acquire(e.ctx, key, baton.WithWaitTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	next("expiry takeover", l2)
	// Force-release.
	if _, err := e.locker.ForceRelease(e.ctx, key, "test"); err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(e.ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("release of a force-released lease: %v, want ErrNotHeld", err)
	}
	l3 := e.acquire(key)
	next("force-release", l3)
	if err := l3.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	// Close and reopen the store.
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := e.backend.Open(t)
	locker, err := baton.NewLocker(reopened, nil)
	if err != nil {
		t.Fatal(err)
	}
	l4, err := locker.TryAcquire(e.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next("close and reopen", l4)
	if err := l4.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
}

func testExpiry(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	const key = "expiry"
	start := time.Now()
	a := e.acquire(key, baton.WithTTL(time.Second), baton.WithKeepalive(false), baton.WithHolder("holder-a"))
	_, err := e.locker.TryAcquire(e.ctx, key, baton.WithHolder("holder-b"))
	var held *baton.LockHeldError
	if !errors.As(err, &held) || !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("TryAcquire on a held key: got %v, want *LockHeldError", err)
	}
	// A store that decides expiry by observation (Kubernetes, DynamoDB) waits the TTL plus drift
	// on its own clock: RetryAfter may be up to that.
	if maxWait := time.Second + time.Duration(baton.DefaultDriftFactor*float64(time.Second)); held.Holder != "holder-a" ||
		held.Token != a.Token || held.RetryAfter <= 0 || held.RetryAfter > maxWait {
		t.Fatalf("LockHeldError = %+v, want holder-a, token %d, 0 < RetryAfter <= %s (the TTL plus drift)", held, a.Token, maxWait)
	}
	// The holder's own view ends before the store's: its context is cancelled first.
	waitDone(t, a, 2*time.Second)
	if !errors.Is(a.Err(), baton.ErrLeaseLost) {
		t.Fatalf("Err after local deadline = %v, want ErrLeaseLost", a.Err())
	}
	b, err := e.locker.Acquire(e.ctx, key, baton.WithHolder("holder-b"), baton.WithWaitTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(e.ctx)
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Fatalf("taken over after %s, before the 1s TTL", elapsed)
	}
	if b.Token <= a.Token && e.store.Capabilities().FencingTokens {
		t.Fatalf("takeover token %d not greater than %d", b.Token, a.Token)
	}
	if info, err := e.store.Get(e.ctx, key); err != nil || info.ID != b.ID {
		t.Fatalf("Get after takeover = %+v, %v", info, err)
	}
	if _, err := e.store.Renew(e.ctx, &store.RenewParams{Key: key, LeaseID: a.ID, TTL: time.Second}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew after takeover: %v, want ErrNotHeld", err)
	}
	if _, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: a.ID}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("release after takeover: %v, want ErrNotHeld", err)
	}
	got, err := e.locker.Get(e.ctx, key)
	if err != nil || got.ID != b.ID {
		t.Fatalf("Get after stale release = %+v, %v; want lease %s", got, err, b.ID)
	}
	if !b.TookOver {
		t.Fatal("the takeover of an expired lease did not report TookOver")
	}
	// The store reports the takeover of an expired lease (for metrics and the audit log), and
	// only that.
	if err := b.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	sl, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "after-release", Holder: "c", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sl.TookOver {
		t.Fatal("a grant after a clean release reported TookOver")
	}
	sl, err = e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "after-release", Holder: "c", TTL: time.Second})
	if err != nil || sl.TookOver {
		t.Fatalf("idempotent re-acquire = %+v, %v; want no TookOver", sl, err)
	}
	_, _ = e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: "after-release"})
}

func testReleaseByOtherID(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	a := e.acquire("other-id")
	if _, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: "other-id", LeaseID: "not-the-lease"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("release by another ID: %v, want ErrNotHeld", err)
	}
	if _, err := e.store.Renew(e.ctx, &store.RenewParams{Key: "other-id", LeaseID: "not-the-lease", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew by another ID: %v, want ErrNotHeld", err)
	}
	got, err := e.locker.Get(e.ctx, "other-id")
	if err != nil || got.ID != a.ID || got.Token != a.Token {
		t.Fatalf("Get = %+v, %v; want the untouched lease %s", got, err, a.ID)
	}
	if _, err := e.locker.TryAcquire(e.ctx, "other-id"); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("key free after a release by another ID: %v", err)
	}
}

func testReleaseTwice(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	a := e.acquire("twice")
	first, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: "twice", LeaseID: a.ID})
	if err != nil || first.AlreadyReleased || first.Held <= 0 || first.Held > time.Minute {
		t.Fatalf("first release = %+v, %v; want released after a positive hold time", first, err)
	}
	if err := a.Release(e.ctx); err != nil {
		t.Fatalf("second Lease.Release: %v", err)
	}
	res, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: "twice", LeaseID: a.ID})
	if err != nil || !res.AlreadyReleased || res.Held != 0 {
		t.Fatalf("store release of a released lease = %+v, %v; want AlreadyReleased", res, err)
	}
	if !errors.Is(a.Err(), baton.ErrReleased) {
		t.Fatalf("Err after release = %v, want ErrReleased", a.Err())
	}
	if _, err := e.locker.Get(e.ctx, "twice"); !errors.Is(err, baton.ErrNotFound) {
		t.Fatalf("Get after release: %v, want ErrNotFound", err)
	}
}

func testIdempotentReacquire(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	a := e.acquire("again", baton.WithHolder("job-7"), baton.WithTTL(2*time.Second))
	b, err := e.locker.TryAcquire(e.ctx, "again", baton.WithHolder("job-7"), baton.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("re-acquire by the same holder: %v", err)
	}
	defer b.Release(e.ctx)
	if b.ID != a.ID || b.Token != a.Token || !b.AcquiredAt.Equal(a.AcquiredAt) {
		t.Fatalf("re-acquire returned %s/%d, want the same lease %s/%d", b.ID, b.Token, a.ID, a.Token)
	}
	if b.ExpiresAt().Before(a.ExpiresAt()) {
		t.Fatalf("re-acquire did not renew: expires %s before %s", b.ExpiresAt(), a.ExpiresAt())
	}
	if _, err := e.locker.TryAcquire(e.ctx, "again", baton.WithHolder("job-8")); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("another holder: %v, want ErrLockHeld", err)
	}
}

func testForceRelease(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	a := e.acquire("force", baton.WithHolder("stuck-worker"), baton.WithKeepalive(false))
	info, err := e.locker.ForceRelease(e.ctx, "force", "worker is wedged")
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != a.ID || info.Holder != "stuck-worker" || info.Token != a.Token {
		t.Fatalf("ForceRelease returned %+v, want lease %s", info, a.ID)
	}
	if err := a.Renew(e.ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("renew after force-release: %v, want ErrNotHeld", err)
	}
	if !errors.Is(a.Err(), baton.ErrLeaseLost) || !errors.Is(a.Err(), baton.ErrNotHeld) {
		t.Fatalf("Err after force-release = %v, want ErrLeaseLost and ErrNotHeld", a.Err())
	}
	b := e.acquire("force")
	if e.store.Capabilities().FencingTokens && b.Token <= a.Token {
		t.Fatalf("token after force-release %d, not greater than %d", b.Token, a.Token)
	}
	if _, err := e.locker.ForceRelease(e.ctx, "free-key", "nothing"); !errors.Is(err, baton.ErrNotFound) {
		t.Fatalf("force-release of a free key: %v, want ErrNotFound", err)
	}
	var inv *baton.InvalidArgumentError
	if _, err := e.locker.ForceRelease(e.ctx, "force", ""); !errors.As(err, &inv) || inv.Field != "reason" {
		t.Fatalf("force-release without reason: %v, want invalid reason", err)
	}
	if got, err := e.locker.Get(e.ctx, "force"); err != nil || got.ID != b.ID {
		t.Fatalf("failed force-release changed the lease: %+v, %v", got, err)
	}
}

func testClosedStore(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	s := b.Open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := s.Acquire(context.Background(), &store.AcquireParams{Key: "k", LeaseID: "id", Holder: "h", TTL: time.Second})
	if !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
}
