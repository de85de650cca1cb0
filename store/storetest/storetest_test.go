package storetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// brokenGrant grants keys that are held, as a store with a broken acquire condition would.
type brokenGrant struct{ store.Store }

func (b brokenGrant) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	l, err := b.Store.Acquire(ctx, p)
	var held *store.LockHeldError
	if errors.As(err, &held) {
		return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Token: held.Token + 1, TTLLeft: p.TTL}, nil
	}
	return l, err
}

// racyCheck checks that a key is free, then writes the grant whatever the store now says, as a
// store whose check and write are two statements outside one transaction would: two acquirers
// that both pass the check both get the key. Only acquirers that race in that window show it.
type racyCheck struct{ store.Store }

func (r racyCheck) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if _, err := r.Store.Get(ctx, p.Key); err == nil {
		return r.Store.Acquire(ctx, p) // held: the real store refuses
	}
	l, err := r.Store.Acquire(ctx, p)
	var held *store.LockHeldError
	if errors.As(err, &held) {
		return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Token: held.Token + 1, TTLLeft: p.TTL}, nil
	}
	return l, err
}

// staleTokens hands out tokens that do not increase, as a store that draws them outside the
// grant, or forgets them on restart, would.
type staleTokens struct{ store.Store }

func (s staleTokens) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	l, err := s.Store.Acquire(ctx, p)
	if l != nil {
		l.Token = 7
	}
	return l, err
}

func openSQLite(t *testing.T) store.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The suite's checks must fail when the invariant is broken, or they prove nothing.
func TestChecksCatchBrokenStores(t *testing.T) {
	ctx := context.Background()
	// A second grant of a held key shows up as two live holders or, when the first holder had
	// just let go in the test's bookkeeping, as a token that did not increase: either fails.
	if _, err := storetest.CheckExclusion(ctx, brokenGrant{openSQLite(t)}, 8, 50, 2); err == nil ||
		!(strings.Contains(err.Error(), "mutual exclusion broken") || strings.Contains(err.Error(), "token order broken")) {
		t.Errorf("CheckExclusion on a store that grants held keys: %v, want an exclusion failure", err)
	}
	if _, err := storetest.CheckExclusion(ctx, staleTokens{openSQLite(t)}, 8, 50, 2); err == nil ||
		!strings.Contains(err.Error(), "token order broken") {
		t.Errorf("CheckExclusion on a store with stale tokens: %v, want a token order failure", err)
	}
	if _, err := storetest.CheckTokenOrder(ctx, staleTokens{openSQLite(t)}, 4, 20); err == nil {
		t.Error("CheckTokenOrder on a store with stale tokens passed")
	}
	// A grant that only a race between check and write lets through is caught too, with the
	// MutualExclusion case's own parameters (32 goroutines, 500 attempts each, 4 keys, at most
	// ten seconds): the check stops at the first violation, within a hundred attempts.
	if _, err := storetest.CheckExclusionWithin(ctx, racyCheck{openSQLite(t)}, 32, 500, 4, 10*time.Second); err == nil ||
		!(strings.Contains(err.Error(), "mutual exclusion broken") || strings.Contains(err.Error(), "token order broken")) {
		t.Errorf("CheckExclusionWithin on a store that grants when acquirers race past its check: %v, want an exclusion failure", err)
	}
	// And they pass on the real store.
	if _, err := storetest.CheckExclusion(ctx, openSQLite(t), 8, 50, 2); err != nil {
		t.Errorf("CheckExclusion on SQLite: %v", err)
	}
}
