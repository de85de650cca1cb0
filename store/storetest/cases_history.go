package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/store"
)

// testHistoryLinearizable: 16 clients run 60 random operations each on 3 keys at the store's
// seam (a try-acquire of a key the client does not hold; a renew or a release of one it holds),
// with a TTL of a minute so that nothing expires. Every operation is recorded as an invocation
// and a response on one monotonic clock, and the history must be linearizable against the lease
// model (internal/history): no grant beside a live lease, tokens that grow in the linearization,
// no refusal of a free key, no renew or release of a lease that ended (for a store without
// fencing tokens, the first and the last only).
func testHistoryLinearizable(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	const clients, opsEach = 16, 60
	keys := []string{"history/a", "history/b", "history/c"}
	rec := history.NewRecorder()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			held := map[string]*store.Lease{}
			defer func() { // the last releases are operations of the history too
				for _, l := range held {
					call := rec.Now()
					res, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID})
					if err == nil || errors.Is(err, store.ErrNotHeld) {
						rec.Add(c, history.Release, l.Key, l.Token, call, rec.Now(), err == nil && !res.AlreadyReleased, 0)
					}
				}
			}()
			for i := range opsEach {
				k := keys[rng.IntN(len(keys))]
				l := held[k]
				call := rec.Now()
				var err error
				switch {
				case l == nil:
					var got *store.Lease
					got, err = e.store.Acquire(e.ctx, &store.AcquireParams{Key: k, LeaseID: fmt.Sprintf("history-%d-%d", c, i),
						Holder: fmt.Sprintf("client-%d", c), TTL: time.Minute})
					ret := rec.Now()
					switch {
					case err == nil:
						rec.Add(c, history.Acquire, k, 0, call, ret, true, got.Token)
						held[k] = got
					case errors.Is(err, store.ErrLockHeld):
						rec.Add(c, history.Acquire, k, 0, call, ret, false, 0)
						err = nil
					}
				case rng.IntN(2) == 0:
					_, err = e.store.Renew(e.ctx, &store.RenewParams{Key: k, LeaseID: l.ID, TTL: time.Minute})
					ret := rec.Now()
					if err == nil || errors.Is(err, store.ErrNotHeld) {
						rec.Add(c, history.Renew, k, l.Token, call, ret, err == nil, 0)
						err = nil
					}
				default:
					var res *store.ReleaseResult
					res, err = e.store.Release(e.ctx, &store.ReleaseParams{Key: k, LeaseID: l.ID})
					ret := rec.Now()
					if err == nil || errors.Is(err, store.ErrNotHeld) {
						rec.Add(c, history.Release, k, l.Token, call, ret, err == nil && !res.AlreadyReleased, 0)
						delete(held, k)
						err = nil
					}
				}
				if err != nil {
					errs <- fmt.Errorf("client %d, operation %d on %q: %w", c, i, k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := history.Model
	if !e.store.Capabilities().FencingTokens {
		m = history.Loose // Redlock: no tokens to order, and split votes refuse everyone
	}
	if err := rec.Check(m, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := rec.Len(); n < clients*opsEach {
		t.Fatalf("%d operations recorded, want at least %d", n, clients*opsEach)
	}
}
