package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// JobBench describes one side of a paired job benchmark: Load queues n no-op jobs (untimed),
// Drain claims and completes them all with the given number of workers (timed).
type JobBench struct {
	Load  func(ctx context.Context, n int) error
	Drain func(ctx context.Context, workers, n int) error
}

// BenchJobsPaired measures baton's drain against baseline's: the two alternate in blocks of
// about b.N/4 jobs so drift in the database weighs on both alike. ns/op is per job for baton;
// jobs/s for both and the ratio ("x-baseline", >1 = faster than the baseline) are reported.
func BenchJobsPaired(b *testing.B, workers int, baseline, baton JobBench) {
	ctx := context.Background()
	const blocks = 4
	var batonTime, baseTime time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := range blocks {
		n := b.N / blocks
		if i == blocks-1 {
			n = b.N - (blocks-1)*(b.N/blocks)
		}
		if n == 0 {
			continue
		}
		d, err := timedDrain(ctx, baseline, workers, n)
		if err != nil {
			b.Fatal("baseline: ", err)
		}
		baseTime += d
		if d, err = timedDrain(ctx, baton, workers, n); err != nil {
			b.Fatal("baton: ", err)
		}
		batonTime += d
	}
	if batonTime > 0 && baseTime > 0 {
		b.ReportMetric(float64(b.N)/batonTime.Seconds(), "jobs/s")
		b.ReportMetric(float64(b.N)/baseTime.Seconds(), "baseline-jobs/s")
		b.ReportMetric(baseTime.Seconds()/batonTime.Seconds(), "x-baseline")
		b.ReportMetric(float64(batonTime.Nanoseconds())/float64(b.N), "ns/job")
	}
}

func timedDrain(ctx context.Context, jb JobBench, workers, n int) (time.Duration, error) {
	if err := jb.Load(ctx, n); err != nil {
		return 0, err
	}
	start := time.Now()
	err := jb.Drain(ctx, workers, n)
	return time.Since(start), err
}

// DrainStore is Baton's drain at the store level: each worker claims up to batch jobs of kind
// per round trip and completes them (in one round trip if the store is a ManyCompleter), until
// n jobs have completed.
func DrainStore(s store.JobStore, kind string, batch int) func(ctx context.Context, workers, n int) error {
	return func(ctx context.Context, workers, n int) error {
		var done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				p := &store.ClaimParams{Worker: "bench-" + string(rune('a'+w)), Kinds: []string{kind}, Limit: batch, TTL: time.Minute}
				for done.Load() < int64(n) {
					js, err := s.ClaimJobs(ctx, p)
					if err != nil {
						errs <- err
						return
					}
					if mc, ok := s.(store.ManyCompleter); ok && len(js) > 1 {
						ps := make([]*store.CompleteParams, len(js))
						for i, j := range js {
							ps[i] = &store.CompleteParams{ID: j.ID, Token: j.Token}
						}
						res, err := mc.CompleteMany(ctx, ps)
						if err != nil {
							errs <- err
							return
						}
						for i, j := range res {
							if j == nil {
								errs <- fmt.Errorf("job %d: not completed", ps[i].ID)
								return
							}
						}
						done.Add(int64(len(js)))
						js = nil
					}
					for _, j := range js {
						if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
							errs <- err
							return
						}
						done.Add(1)
					}
					if len(js) == 0 && done.Load() < int64(n) {
						// Another worker holds the rest; wait for a promotion or for the end.
						wake, cancel := s.SubscribeJobs(kind)
						select {
						case <-wake:
						case <-time.After(5 * time.Millisecond):
						}
						cancel()
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return errors.Join(drainErrs(errs)...)
	}
}

func drainErrs(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}
