package storetest

import (
	"context"
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
	const settle = 2 * time.Millisecond
	b.Run("lease-to-lease", func(b *testing.B) {
		ctx := b.Context()
		key := "handoff/lease"
		var lat []time.Duration
		for range b.N {
			held, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
			if err != nil {
				b.Fatal(err)
			}
			got := make(chan *baton.Lease, 1)
			go func() {
				next, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
				if err != nil {
					b.Error(err)
				}
				got <- next
			}()
			time.Sleep(settle)
			start := time.Now()
			if err := held.Release(ctx); err != nil {
				b.Fatal(err)
			}
			next := <-got
			lat = append(lat, time.Since(start))
			if next == nil {
				b.FailNow()
			}
			if err := next.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		ReportPercentiles(b, lat)
	})
	b.Run("job-to-lock", func(b *testing.B) {
		ctx := b.Context()
		key := "handoff/job"
		var lat []time.Duration
		for range b.N {
			if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "handoff", Resource: key}); err != nil {
				b.Fatal(err)
			}
			js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"handoff"}, Limit: 1, TTL: time.Minute})
			if err != nil || len(js) != 1 {
				b.Fatalf("claim: %v, %v", js, err)
			}
			got := make(chan *baton.Lease, 1)
			go func() {
				next, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
				if err != nil {
					b.Error(err)
				}
				got <- next
			}()
			time.Sleep(settle)
			start := time.Now()
			if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token}); err != nil {
				b.Fatal(err)
			}
			next := <-got
			lat = append(lat, time.Since(start))
			if next == nil {
				b.FailNow()
			}
			if err := next.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		ReportPercentiles(b, lat)
	})
	b.Run("lock-to-job", func(b *testing.B) {
		ctx := b.Context()
		key := "handoff/lock"
		var lat []time.Duration
		for range b.N {
			held, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "handoff", Resource: key}); err != nil {
				b.Fatal(err)
			}
			got := make(chan *store.Job, 1)
			go func() {
				wake, cancel := s.SubscribeJobs("handoff")
				defer cancel()
				for {
					js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"handoff"}, Limit: 1, TTL: time.Minute})
					if err != nil {
						b.Error(err)
						got <- nil
						return
					}
					if len(js) == 1 {
						got <- js[0]
						return
					}
					select {
					case <-wake:
					case <-time.After(time.Second): // a worker's poll
					case <-ctx.Done():
						got <- nil
						return
					}
				}
			}()
			time.Sleep(settle)
			start := time.Now()
			if err := held.Release(ctx); err != nil {
				b.Fatal(err)
			}
			j := <-got
			lat = append(lat, time.Since(start))
			if j == nil {
				b.FailNow()
			}
			if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
				b.Fatal(err)
			}
		}
		ReportPercentiles(b, lat)
	})
}
