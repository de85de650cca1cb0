package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// heldBackStore holds back the Release calls sent while it is armed, as a stalled network or a
// queued statement does: the caller's call fails when its context ends, but the release is
// still applied later, when deliver is called, as a server or database that had received it
// would apply it.
type heldBackStore struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	release chan struct{} // closed by deliver
	applied chan error    // the held-back release's own result
	once    sync.Once
	result  error
}

func (s *heldBackStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.release, s.applied = true, make(chan struct{}), make(chan error, 1)
}

func (s *heldBackStore) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	s.mu.Lock()
	armed, release, applied := s.armed, s.release, s.applied
	s.armed = false
	s.mu.Unlock()
	if !armed {
		return s.Store.Release(ctx, p)
	}
	q := *p
	go func() {
		<-release
		_, err := s.Store.Release(context.Background(), &q)
		applied <- err
	}()
	<-ctx.Done()
	return nil, ctx.Err()
}

// deliver applies the held-back release and returns its result; calling it again returns the
// same result.
func (s *heldBackStore) deliver() error {
	s.once.Do(func() {
		close(s.release)
		s.result = <-s.applied
	})
	return s.result
}

// A release whose outcome was unknown (it timed out) is applied after the same holder
// re-acquired the key (etcd found it with a leader stalled; a cancelled SQL statement can still
// commit). The re-acquired lease must survive it: the Locker does not hand back a lease whose
// release may still land, but finishes that release and grants afresh.
func testReleaseOutcomeUnknown(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	held := &heldBackStore{Store: b.Open(t)}
	locker, err := baton.NewLocker(held, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []baton.Option{baton.WithHolder("deploy-worker-1"), baton.WithTTL(10 * time.Second)}
	first, err := locker.TryAcquire(ctx, "unsettled", opts...)
	if err != nil {
		t.Fatal(err)
	}
	held.arm()
	// A test that fails early still lets the held-back release's goroutine finish.
	t.Cleanup(func() { _ = held.deliver() })
	relCtx, relCancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = first.Release(relCtx)
	relCancel()
	if err == nil {
		t.Fatal("the held-back release succeeded")
	}
	second, err := locker.TryAcquire(ctx, "unsettled", opts...)
	if err != nil {
		t.Fatalf("re-acquire after a release of unknown outcome: %v", err)
	}
	defer second.Release(context.Background())
	if err := held.deliver(); err != nil && !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("the late release: %v", err)
	}
	// The late release changed nothing: the key is still the second lease's.
	if l, err := held.Get(ctx, "unsettled"); err != nil || l.ID != second.ID {
		t.Fatalf("the late release of lease %s ended the re-acquired lease %s: the store has %+v, %v",
			first.ID, second.ID, l, err)
	}
	if second.ID == first.ID {
		t.Fatalf("re-acquire handed back lease %s, whose release could still be applied", first.ID)
	}
	if caps := held.Capabilities(); caps.FencingTokens && second.Token <= first.Token {
		t.Fatalf("token %d after %d: the re-acquire must be a new grant", second.Token, first.Token)
	}
	if err := second.Renew(ctx); err != nil {
		t.Fatalf("renew after the late release: %v", err)
	}
	if _, err := locker.TryAcquire(ctx, "unsettled", baton.WithHolder("deploy-worker-2")); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("another holder after the late release: %v, want ErrLockHeld", err)
	}
}
