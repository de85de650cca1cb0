package baton_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// lineHangGuard bounds a test's waits for a condition: only a hang reaches it, never a loaded
// machine. The line's tickets and polls in these tests last far longer (lineTTL).
const lineHangGuard = 3 * time.Minute

// lineTTL is the lease and ticket TTL, and the poll interval, of the line tests: so long that
// nothing but the behaviour under test can let a waiter through within lineHangGuard.
const lineTTL = time.Hour

// An Acquire whose context ends while it waits leaves the line at once (Locker.wait's leaveLine):
// its ticket is gone when Acquire returns, and the waiter behind it is granted as soon as the
// holder releases, not an hour later when the abandoned ticket would have expired.
func TestAcquireThatGivesUpLeavesTheLine(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs := storetest.NewRefusals(st)
	locker, err := baton.NewLocker(rs, &baton.Config{TTL: lineTTL, PollInterval: lineTTL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lineHangGuard)
	defer cancel()
	const key = "line/leave"

	holder, err := locker.TryAcquire(ctx, key, baton.WithHolder("holder"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(context.Background()) }()

	// The quitter waits first, next behind it.
	quitCtx, quit := context.WithCancel(ctx)
	defer quit()
	quitDone := make(chan error, 1)
	go func() {
		_, err := locker.Acquire(quitCtx, key, baton.WithHolder("quitter"))
		quitDone <- err
	}()
	rs.WaitRefused(t, "quitter", lineHangGuard)
	type result struct {
		lease *baton.Lease
		err   error
	}
	nextCtx, stopNext := context.WithCancel(ctx)
	defer stopNext()
	nextDone := make(chan result, 1)
	go func() {
		l, err := locker.Acquire(nextCtx, key, baton.WithHolder("next"))
		nextDone <- result{l, err}
	}()
	rs.WaitRefused(t, "next", lineHangGuard)
	if got := storetest.LineHolders(t, st, key); len(got) != 2 || got[0] != "quitter" || got[1] != "next" {
		t.Fatalf("line %v; want [quitter next]", got)
	}

	quit()
	if err := <-quitDone; !errors.Is(err, context.Canceled) || !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("the quitter's Acquire: %v; want the cancellation and the refusal", err)
	}
	if got := storetest.LineHolders(t, st, key); len(got) != 1 || got[0] != "next" {
		t.Errorf("line after the quitter gave up %v; want [next]: its ticket should be gone at once", got)
	}

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-nextDone // bounded by ctx (lineHangGuard); the quitter's ticket would last lineTTL
	if r.err != nil {
		t.Fatalf("next, after the holder released: %v; want the key (the quitter's ticket held the line)", r.err)
	}
	if err := r.lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
