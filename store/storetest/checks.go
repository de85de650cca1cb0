package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// ExclusionStats counts what CheckExclusion saw.
type ExclusionStats struct {
	Attempts, Grants, Held int64
}

// CheckExclusion runs goroutines x attempts TryAcquire/Release cycles over keys keys and
// returns an error at the first instant two leases of one key were live together, or a grant
// whose token was not greater than the previous grant's of that key. The checks are the test's
// own bookkeeping, not the store's word.
func CheckExclusion(ctx context.Context, s store.Store, goroutines, attempts, keys int) (ExclusionStats, error) {
	return CheckExclusionWithin(ctx, s, goroutines, attempts, keys, 0)
}

// MinAttemptsWithin is how many attempts each goroutine of CheckExclusionWithin makes however
// long they take.
const MinAttemptsWithin = 10

// CheckExclusionWithin is CheckExclusion bounded by time as well as by count: once budget has
// passed (if it is not zero), a goroutine that made at least MinAttemptsWithin attempts starts
// no more. On a loaded machine the check then does less work instead of running into the
// test's deadline; the stats say how much it did.
func CheckExclusionWithin(ctx context.Context, s store.Store, goroutines, attempts, keys int, budget time.Duration) (ExclusionStats, error) {
	start := time.Now()
	overBudget := func(done int) bool {
		return budget > 0 && done >= MinAttemptsWithin && time.Since(start) > budget
	}
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		return ExclusionStats{}, err
	}
	type keyState struct {
		holders   atomic.Int32
		mu        sync.Mutex
		lastToken uint64
	}
	states := make([]*keyState, keys)
	for i := range states {
		states[i] = &keyState{}
	}
	var stats ExclusionStats
	var firstErr error
	var errOnce sync.Once
	var failed atomic.Bool
	var releaseErr error
	var releaseOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		failed.Store(true)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for a := range attempts {
				if failed.Load() || overBudget(a) {
					return
				}
				k := (g + a) % keys
				key := fmt.Sprintf("exclusion/%d", k)
				atomic.AddInt64(&stats.Attempts, 1)
				lease, err := locker.TryAcquire(ctx, key, baton.WithTTL(time.Minute), baton.WithKeepalive(false))
				if errors.Is(err, baton.ErrLockHeld) {
					atomic.AddInt64(&stats.Held, 1)
					continue
				}
				if err != nil {
					fail(fmt.Errorf("acquire %s: %w", key, err))
					return
				}
				atomic.AddInt64(&stats.Grants, 1)
				st := states[k]
				if n := st.holders.Add(1); n != 1 {
					fail(fmt.Errorf("mutual exclusion broken: %d live holders of %s (token %d)", n, key, lease.Token))
				}
				st.mu.Lock()
				if lease.Token <= st.lastToken {
					fail(fmt.Errorf("token order broken on %s: granted %d after %d", key, lease.Token, st.lastToken))
				}
				st.lastToken = lease.Token
				st.mu.Unlock()
				runtime.Gosched() // let others try while we hold it
				st.holders.Add(-1)
				if err := lease.Release(ctx); err != nil {
					// Reported only if no overlap was seen: an overlap explains it.
					releaseOnce.Do(func() { releaseErr = fmt.Errorf("release %s: %w", key, err) })
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = releaseErr
	}
	if firstErr == nil && stats.Grants == 0 {
		firstErr = errors.New("no acquisition succeeded")
	}
	return stats, firstErr
}

type grant struct {
	start, end time.Time
	token      uint64
}

// CheckTokenOrder has goroutines acquire and release one key, each attempts times, straight
// against the store, and checks real-time order: if one acquire returned before another began,
// its token is smaller. This catches a token drawn before the grant and used after a later one.
func CheckTokenOrder(ctx context.Context, s store.Store, goroutines, attempts int) (int, error) {
	var mu sync.Mutex
	var grants []grant
	var firstErr error
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for a := range attempts {
				id := fmt.Sprintf("order-%d-%d", g, a)
				start := time.Now()
				l, err := s.Acquire(ctx, &store.AcquireParams{Key: "order", LeaseID: id, Holder: id, TTL: time.Minute})
				end := time.Now()
				if errors.Is(err, store.ErrLockHeld) {
					continue
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					grants = append(grants, grant{start, end, l.Token})
				}
				mu.Unlock()
				if err != nil {
					return
				}
				if _, err := s.Release(ctx, &store.ReleaseParams{Key: "order", LeaseID: id}); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return len(grants), firstErr
	}
	return len(grants), checkRealTimeOrder(grants)
}

// checkRealTimeOrder sweeps grants by start time, keeping the largest token among grants that
// had already returned.
func checkRealTimeOrder(grants []grant) error {
	byEnd := append([]grant(nil), grants...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end.Before(byEnd[j].end) })
	byStart := append([]grant(nil), grants...)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].start.Before(byStart[j].start) })
	var maxDone uint64
	i := 0
	for _, g := range byStart {
		for i < len(byEnd) && byEnd[i].end.Before(g.start) {
			maxDone = max(maxDone, byEnd[i].token)
			i++
		}
		if g.token <= maxDone {
			return fmt.Errorf("token %d was granted after token %d had been returned", g.token, maxDone)
		}
	}
	return nil
}
