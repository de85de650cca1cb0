package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store/storetest"
)

// A Locker waiting through the HTTP client that gives up (its ctx ends, or its wait timeout
// passes) leaves the key's line
// before its Acquire returns (POST /v1/locks/leave), so that the next waiter is granted at the
// release, not when the quitter's ticket would have expired (an hour here): the server keeps a
// ticket whose long-poll was merely hung up.
func TestGivingUpLeavesTheLine(t *testing.T) {
	b := newBackend(t, backendOptions{})
	ctx := testContext(t)
	st := b.open(t, client.Config{})
	locker, err := baton.NewLocker(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "line/quit"
	holder, err := locker.TryAcquire(ctx, key, baton.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	quitCtx, quit := context.WithCancel(ctx)
	defer quit()
	quitter := make(chan error, 1)
	go func() {
		l, err := locker.Acquire(quitCtx, key, baton.WithTTL(time.Hour), baton.WithHolder("quitter"))
		if err == nil {
			err = errors.New("granted to " + l.Holder)
		}
		quitter <- err
	}()
	select {
	case <-b.refused: // the quitter waits in the line
	case err := <-quitter:
		t.Fatalf("the quitter returned before it waited: %v", err)
	}
	next := make(chan *baton.Lease, 1)
	go func() {
		l, err := locker.Acquire(ctx, key, baton.WithTTL(time.Hour), baton.WithHolder("next"))
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	waitForLine(t, ctx, st, key, "quitter", "next")

	quit()
	if err := <-quitter; !errors.Is(err, context.Canceled) {
		t.Fatalf("the quitter: %v; want its ctx's end", err)
	}
	if got := storetest.LineHolders(t, st, key); !slices.Equal(got, []string{"next"}) {
		t.Fatalf("line once the quitter's Acquire returned: %v; want [next]", got)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-next
	if l == nil {
		t.FailNow()
	}

	// A wait timeout is a give-up too.
	_, err = locker.Acquire(ctx, key, baton.WithTTL(time.Hour), baton.WithHolder("timed"), baton.WithWaitTimeout(300*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that timed out: %v", err)
	}
	if got := storetest.LineHolders(t, st, key); len(got) != 0 {
		t.Fatalf("line once the timed-out Acquire returned: %v; want it empty", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitForLine returns once key's line is want, read through st; it fails the test when ctx ends
// first.
func waitForLine(t *testing.T, ctx context.Context, st *client.Store, key string, want ...string) {
	t.Helper()
	for {
		got := storetest.LineHolders(t, st, key)
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("line of %s: %v; never %v", key, got, want)
		case <-time.After(5 * time.Millisecond): // pacing the reads
		}
	}
}
