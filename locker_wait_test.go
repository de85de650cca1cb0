package baton_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// flakyStore fails Acquire with err for its first n calls, then passes them on.
type flakyStore struct {
	store.Store
	n     int64
	err   error
	calls atomic.Int64
}

func (f *flakyStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if f.calls.Add(1) <= f.n {
		return nil, f.err
	}
	return f.Store.Acquire(ctx, p)
}

// A waiting Acquire rides out a store that is unreachable for a while (a server or database
// restart) and gets the key once it is back; errors that cannot go away by themselves end the
// wait at once.
func TestAcquireWaitsThroughTransientStoreErrors(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	refused := fmt.Errorf("dial tcp 127.0.0.1:7725: connect: connection refused")
	flaky := &flakyStore{Store: st, n: 5, err: refused}
	locker, err := baton.NewLocker(flaky, &baton.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := locker.Acquire(ctx, "k", baton.WithWaitTimeout(time.Minute))
	if err != nil {
		t.Fatalf("Acquire through 5 transient failures: %v", err)
	}
	if n := flaky.calls.Load(); n != 6 {
		t.Fatalf("%d attempts; want 6", n)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Still failing when the wait ends: the error says both.
	down := &flakyStore{Store: st, n: 1 << 40, err: refused}
	locker, err = baton.NewLocker(down, &baton.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = locker.Acquire(ctx, "k", baton.WithWaitTimeout(500*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Acquire against a store down for the whole wait: %v", err)
	}
	if n := down.calls.Load(); n < 3 {
		t.Fatalf("only %d attempts in 500ms", n)
	}

	for _, permanent := range []error{store.ErrClosed, &store.InvalidArgumentError{Field: "key", Rule: "test"}} {
		f := &flakyStore{Store: st, n: 1 << 40, err: permanent}
		locker, err := baton.NewLocker(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := locker.Acquire(ctx, "k", baton.WithWaitTimeout(time.Minute)); !errors.Is(err, permanent) || f.calls.Load() != 1 {
			t.Fatalf("Acquire on %v: %v after %d attempts; want it at once", permanent, err, f.calls.Load())
		}
	}
}

// A lease whose local deadline passes is not released by the library: the work under it may
// still be stopping. The key stays taken until the holder releases it or the store expires it.
func TestLocalDeadlineDoesNotRelease(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A store whose renews fail: the lease reaches its local deadline.
	locker, err := baton.NewLocker(&failingRenew{Store: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := locker.TryAcquire(ctx, "k", baton.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	if !errors.Is(lease.Err(), baton.ErrLeaseLost) {
		t.Fatalf("lease ended with %v", lease.Err())
	}
	if l, err := st.Get(ctx, "k"); err != nil || l.ID != lease.ID {
		t.Fatalf("after the local deadline the store has %+v, %v; want the lease still there", l, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release after the work stopped: %v", err)
	}
	if _, err := st.Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after Release: %v; want the key free", err)
	}
}

type failingRenew struct{ store.Store }

func (f *failingRenew) Renew(context.Context, *store.RenewParams) (*store.Lease, error) {
	return nil, errors.New("renew: connection refused")
}

// overloaded is a transient refusal that asks to be retried after a while, as the Go client's
// error for a 503 with Retry-After does.
type overloaded struct{ after time.Duration }

func (o overloaded) Error() string                 { return "503 overloaded" }
func (o overloaded) RetryAfterHint() time.Duration { return o.after }

// timedStore records when Acquire was called.
type timedStore struct {
	flakyStore
	mu    sync.Mutex
	times []time.Time
}

func (s *timedStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	return s.flakyStore.Acquire(ctx, p)
}

// A waiting Acquire told to come back later (Retry-After) waits at least that long before its
// next attempt, although its own backoff would retry sooner.
func TestAcquireWaitsRetryAfter(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const after = 300 * time.Millisecond
	ts := &timedStore{flakyStore: flakyStore{Store: st, n: 2, err: fmt.Errorf("acquire: %w", overloaded{after})}}
	locker, err := baton.NewLocker(ts, &baton.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := locker.Acquire(context.Background(), "k", baton.WithWaitTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.times) != 3 {
		t.Fatalf("%d attempts, want 3", len(ts.times))
	}
	for i := 1; i < len(ts.times); i++ {
		if gap := ts.times[i].Sub(ts.times[i-1]); gap < after {
			t.Fatalf("attempt %d came %s after the one told to retry after %s", i+1, gap, after)
		}
	}
}
