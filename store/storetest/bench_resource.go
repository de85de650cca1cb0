package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// ResourceStore is a store whose leases and jobs share one resource per key.
type ResourceStore interface {
	store.Store
	store.JobStore
}

// BenchCrossHandoff measures a key's handoff between the halves of one resource, one waiter at
// a time: lease to lease (the baseline, a Locker waiting), job to lock (a Locker waits while a
// job attempt holds the key; the attempt completes) and lock to job (a job waits, its worker
// blocked on SubscribeJobs as baton.Worker is, while a lease holds the key; the lease is
// released). Each handoff is timed from the start of the call that ends the holder to the
// moment the waiter has the key, and p50 and p99 are reported in milliseconds. The holder ends
// 2 ms after the waiter started waiting, so that the waiter is blocked (not yet asking) when it
// does.
func BenchCrossHandoff(b *testing.B, s ResourceStore) {
	l, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.RegisterKinds(context.Background(), []store.Kind{{Name: "handoff"}}); err != nil {
		b.Fatal(err)
	}
	b.Run("lease-to-lease", func(b *testing.B) {
		key := "handoff/lease"
		benchHandoffs(b, func(ctx context.Context) (func() error, error) {
			held, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
			if err != nil {
				return nil, err
			}
			return func() error { return held.Release(ctx) }, nil
		}, lockWaiter(l, key))
	})
	b.Run("job-to-lock", func(b *testing.B) {
		key := "handoff/job"
		benchHandoffs(b, func(ctx context.Context) (func() error, error) {
			if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "handoff", Resource: key}); err != nil {
				return nil, err
			}
			js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"handoff"}, Limit: 1, TTL: time.Minute})
			if err != nil || len(js) != 1 {
				return nil, fmt.Errorf("claim: %v, %v", js, err)
			}
			return func() error {
				_, err := s.CompleteJob(ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token})
				return err
			}, nil
		}, lockWaiter(l, key))
	})
	b.Run("lock-to-job", func(b *testing.B) {
		key := "handoff/lock"
		benchHandoffs(b, func(ctx context.Context) (func() error, error) {
			held, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
			if err != nil {
				return nil, err
			}
			if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "handoff", Resource: key}); err != nil {
				return nil, err
			}
			return func() error { return held.Release(ctx) }, nil
		}, func(ctx context.Context) (func() error, error) {
			wake, cancel := s.SubscribeJobs("handoff")
			defer cancel()
			for {
				js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"handoff"}, Limit: 1, TTL: time.Minute})
				if err != nil {
					return nil, err
				}
				if len(js) == 1 {
					return func() error {
						_, err := s.CompleteJob(ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token})
						return err
					}, nil
				}
				select {
				case <-wake:
				case <-time.After(time.Second): // a worker's poll
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		})
	})
}

// lockWaiter waits for key with the Locker and returns the lease's release.
func lockWaiter(l *baton.Locker, key string) func(ctx context.Context) (func() error, error) {
	return func(ctx context.Context) (func() error, error) {
		next, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
		if err != nil {
			return nil, err
		}
		return func() error { return next.Release(ctx) }, nil
	}
}

// benchHandoffs runs b.N handoffs of one key: hold takes it and returns how to end the hold;
// wait, started 2 ms before the holder ends (so that it is blocked, not yet asking), waits for
// the key and returns how to free it again. Each handoff is timed from the start of the end of
// the hold to the moment wait has the key; p50 and p99 are reported in milliseconds.
func benchHandoffs(b *testing.B, hold, wait func(ctx context.Context) (func() error, error)) {
	ctx := b.Context()
	var lat []time.Duration
	for range b.N {
		end, err := hold(ctx)
		if err != nil {
			b.Fatal(err)
		}
		type got struct {
			free func() error
			err  error
		}
		ch := make(chan got, 1)
		go func() {
			free, err := wait(ctx)
			ch <- got{free, err}
		}()
		time.Sleep(2 * time.Millisecond)
		start := time.Now()
		if err := end(); err != nil {
			b.Fatal(err)
		}
		g := <-ch
		lat = append(lat, time.Since(start))
		if g.err != nil {
			b.Fatal(g.err)
		}
		if err := g.free(); err != nil {
			b.Fatal(err)
		}
	}
	ReportPercentiles(b, lat)
}
