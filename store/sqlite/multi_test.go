package sqlite_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/storetest"
)

// alternating sends each call to the next of several stores on one file, as several processes
// sharing the file would.
type alternating struct {
	store.Store
	all  []store.Store
	next atomic.Uint64
}

func (a *alternating) pick() store.Store { return a.all[a.next.Add(1)%uint64(len(a.all))] }

func (a *alternating) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	return a.pick().Acquire(ctx, p)
}

func (a *alternating) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	return a.pick().Release(ctx, p)
}

// Stores that share a file through separate connections exclude each other through SQLite's
// write lock, not through anything in this process.
func TestExclusionAcrossConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, b, c := open(t, path), open(t, path), open(t, path)
	s := &alternating{Store: a, all: []store.Store{a, b, c}}
	stats, err := storetest.CheckExclusion(context.Background(), s, 16, 200, 2)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Held == 0 {
		t.Fatal("no contention between the connections")
	}
}

// A waiter on another connection is not pushed; it finds the key free at its next poll.
func TestWaiterOnOtherConnectionPolls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	ctx := context.Background()
	holder, err := baton.NewLocker(open(t, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, refused := storetest.SignalRefusal(open(t, path))
	const poll = 200 * time.Millisecond
	waiter, err := baton.NewLocker(other, &baton.Config{PollInterval: poll})
	if err != nil {
		t.Fatal(err)
	}
	l, err := holder.TryAcquire(ctx, "k", baton.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *baton.Lease
		err   error
	}
	// The wait ends well before the holder's minute-long TTL: a waiter that gets the key found it
	// free at a poll, not at the expiry.
	done := make(chan result, 1)
	go func() {
		got, err := waiter.Acquire(ctx, "k", baton.WithWaitTimeout(30*time.Second))
		done <- result{got, err}
	}()
	<-refused // the waiter is waiting
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("waiter on another connection: %v", r.err)
	}
	defer r.lease.Release(ctx)
	// Up to one jittered poll interval (+20%) on an idle machine; logged, as load stretches it.
	t.Logf("waiter took %s after the release (poll %s)", time.Since(released).Round(time.Millisecond), poll)
	if r.lease.Token <= l.Token {
		t.Fatalf("token %d after %d", r.lease.Token, l.Token)
	}
}
