package baton

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/store"
)

// unsettled remembers the leases whose release was sent but whose outcome is unknown (the call
// timed out or the connection broke): the release may still be applied later, by a server or a
// database that had received it. A re-acquire by the same holder would get that very lease back
// (idempotent re-acquire keeps the lease ID), and the late release would then end it under its
// new user while another holder is granted the key. So a Locker never hands out a lease it has
// an unsettled release for: it finishes the release first and takes the key afresh.
//
// An entry can be dropped once the lease has surely expired: nothing of this Locker renews it
// after its release was sent, and after its expiry the store grants a new lease ID even to the
// same holder.
type unsettled struct {
	mu    sync.Mutex
	until map[string]time.Time // lease ID -> when the lease has surely expired
}

func (u *unsettled) add(id string, ttl time.Duration, drift float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	if u.until == nil {
		u.until = map[string]time.Time{}
	}
	for k, t := range u.until {
		if now.After(t) {
			delete(u.until, k)
		}
	}
	// The store's clock may run slow by the drift bound; a second more for the request.
	u.until[id] = now.Add(time.Duration(float64(ttl)*(1+drift)) + time.Second)
}

func (u *unsettled) has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.until[id]
	return ok && time.Now().Before(t)
}

func (u *unsettled) remove(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.until, id)
}

// settledRelease reports whether a release's outcome is known: it was applied, or the store
// said the lease was not there (or the request was refused as invalid before anything was sent).
func settledRelease(err error) bool {
	return err == nil || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrInvalidArgument)
}

// grant is one store acquire that never returns a lease with an unsettled release: if the store
// hands one back (the same holder re-acquiring), the release is finished now and the key taken
// afresh, with a new lease ID and token.
func (l *Locker) grant(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	sl, err := l.store.Acquire(ctx, p)
	if err != nil || !l.pending.has(sl.ID) {
		return sl, err
	}
	if _, err := l.store.Release(ctx, &store.ReleaseParams{Key: sl.Key, LeaseID: sl.ID}); !settledRelease(err) {
		return nil, err
	}
	l.pending.remove(sl.ID)
	return l.store.Acquire(ctx, p)
}
