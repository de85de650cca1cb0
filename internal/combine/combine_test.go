package combine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Every call gets its own answer, no more than Slots runs overlap, no run exceeds MaxBatch, and
// calls that queue behind busy slots share runs.
func TestCombinerBatchesQueuedCalls(t *testing.T) {
	const slots, maxBatch, callers = 2, 16, 400
	var running, peak, runs, biggest atomic.Int64
	release := make(chan struct{})
	var first sync.Once
	c := &Combiner[int, int]{Slots: slots, MaxBatch: maxBatch, Run: func(ctx context.Context, calls []*Call[int, int]) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		runs.Add(1)
		if int64(len(calls)) > biggest.Load() {
			biggest.Store(int64(len(calls)))
		}
		// The first run holds its slot until every caller has queued, so that batches must form.
		first.Do(func() { <-release })
		for _, call := range calls {
			if call.Req%7 == 0 {
				call.Err = errors.New("seven")
				continue
			}
			call.Res = call.Req * 2
		}
	}}
	var wg sync.WaitGroup
	var queued atomic.Int64
	errs := make(chan error, callers)
	for i := 1; i <= callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			queued.Add(1)
			res, err := c.Do(context.Background(), i)
			switch {
			case i%7 == 0 && (err == nil || err.Error() != "seven"):
				errs <- errors.New("a failing call was not told")
			case i%7 != 0 && (err != nil || res != 2*i):
				errs <- errors.New("a call got another's answer")
			}
		}()
	}
	// Wait until every caller is inside Do or queued: the count of calls held by the combiner.
	for {
		c.mu.Lock()
		n := 0
		for _, b := range c.queue {
			n += len(b.calls)
		}
		c.mu.Unlock()
		if n >= callers-slots {
			break
		}
		waitABit()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := peak.Load(); p > slots {
		t.Fatalf("%d runs overlapped; slots = %d", p, slots)
	}
	if b := biggest.Load(); b > maxBatch || b < 2 {
		t.Fatalf("biggest batch %d; want 2..%d", b, maxBatch)
	}
	if r := runs.Load(); r >= callers {
		t.Fatalf("%d runs for %d calls: nothing was combined", r, callers)
	}
	t.Logf("%d calls in %d runs, biggest %d", callers, runs.Load(), biggest.Load())
}

// A call whose context ended while it queued is answered with its context's error and never
// handed to Run.
func TestCombinerSkipsCallsThatGaveUp(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{})
	var got atomic.Int64
	c := &Combiner[int, int]{Slots: 1, MaxBatch: 8, Run: func(ctx context.Context, calls []*Call[int, int]) {
		for _, call := range calls {
			if call.Req == 2 {
				got.Add(1)
			}
		}
		if calls[0].Req == 1 {
			close(started)
			<-block
		}
	}}
	done1 := make(chan struct{})
	go func() { defer close(done1); _, _ = c.Do(context.Background(), 1) }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { _, err := c.Do(ctx, 2); done2 <- err }()
	for {
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		if n == 1 {
			break
		}
		waitABit()
	}
	cancel()
	if err := <-done2; !errors.Is(err, context.Canceled) {
		t.Fatalf("gave-up call: %v", err)
	}
	close(block)
	<-done1
	// The queued batch runs (or is skipped) on the same slot before it frees.
	for {
		c.mu.Lock()
		idle := c.running == 0
		c.mu.Unlock()
		if idle {
			break
		}
		waitABit()
	}
	if got.Load() != 0 {
		t.Fatal("Run got a call whose context had ended")
	}
}
