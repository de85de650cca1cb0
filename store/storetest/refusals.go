package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// LineStore is a store with jobs and a line (SQLite, PostgreSQL): what the Locker and the
// server use of it.
type LineStore interface {
	store.Store
	store.JobStore
	store.LineWaiter
	store.LineReader
}

// Refusals wraps a LineStore and reports, by holder, each waiting Acquire it refuses: the
// waiter's ticket is then in the line (enqueued, or kept alive). Its other methods, the line's
// and the jobs' included, are the store's.
type Refusals struct {
	LineStore
	refused chan string
}

// NewRefusals wraps s.
func NewRefusals(s LineStore) *Refusals {
	return &Refusals{LineStore: s, refused: make(chan string, 16)}
}

func (s *Refusals) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	l, err := s.LineStore.Acquire(ctx, p)
	if p.Wait && errors.Is(err, store.ErrLockHeld) {
		select {
		case s.refused <- p.Holder:
		default: // a retry's refusal nobody waits for
		}
	}
	return l, err
}

// WaitRefused returns once the store has refused a waiting acquire of holder; it fails the test
// if that takes longer than guard (a hang).
func (s *Refusals) WaitRefused(t testing.TB, holder string, guard time.Duration) {
	t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case h := <-s.refused:
			if h == holder {
				return
			}
		case <-timeout:
			t.Fatalf("%s was not refused in %s (hung)", holder, guard)
		}
	}
}

// SignalRefusal wraps s so that the returned channel is closed at the first Acquire that finds
// the key held: a test then knows its waiter is waiting, without sleeping. The wrapper keeps s's
// line (a LineStore stays one), so that a Locker over it waits in the line as over s.
func SignalRefusal(s store.Store) (store.Store, <-chan struct{}) {
	r := &refusalSignal{Store: s, refused: make(chan struct{})}
	if ls, ok := s.(LineStore); ok {
		return &lineRefusalSignal{LineStore: ls, r: r}, r.refused
	}
	return r, r.refused
}

type refusalSignal struct {
	store.Store
	once    sync.Once
	refused chan struct{}
}

func (s *refusalSignal) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	l, err := s.Store.Acquire(ctx, p)
	if errors.Is(err, store.ErrLockHeld) {
		s.once.Do(func() { close(s.refused) })
	}
	return l, err
}

// lineRefusalSignal is refusalSignal over a LineStore.
type lineRefusalSignal struct {
	LineStore
	r *refusalSignal
}

func (s *lineRefusalSignal) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	return s.r.Acquire(ctx, p)
}
