// Package combine runs calls that queue as batches: group commit for any operation that has a
// batched form.
//
// A Combiner lets at most Slots runs go at once. A call that finds a slot free runs at once,
// alone: nothing waits on purpose, so an idle system answers with the latency of one call.
// Calls that find every slot busy queue, and the next free slot takes every queued call (up to
// MaxBatch) as one batch. Under load, batches grow to match the load; the cost per call falls
// exactly when it matters.
package combine

import (
	"context"
	"sync"
	"time"
)

// Call is one queued request and, once its batch ran, its answer.
type Call[Req, Res any] struct {
	Ctx context.Context
	Req Req
	Res Res
	Err error
}

// Combiner batches calls to Run.
type Combiner[Req, Res any] struct {
	// Slots is how many runs may go at once (at least 1).
	Slots int
	// MaxBatch bounds the calls of one run (at least 1).
	MaxBatch int
	// Run runs a batch and sets each call's Res or Err. It gets only calls whose context was
	// live when the batch started, and a context that ends when the last of their deadlines
	// passes (or never, if one has none); it is not cancelled when one caller gives up, so that
	// one caller cannot fail the others.
	Run func(ctx context.Context, calls []*Call[Req, Res])

	mu      sync.Mutex
	running int
	queue   []*batch[Req, Res] // FIFO; only the last one takes newcomers
}

type batch[Req, Res any] struct {
	calls []*Call[Req, Res]
	done  chan struct{}
}

// Do runs req, alone or in a batch, and returns its answer. If ctx ends first, Do returns
// ctx.Err(); the call may still run (like any call that timed out, the caller cannot know).
func (c *Combiner[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	call := &Call[Req, Res]{Ctx: ctx, Req: req}
	c.mu.Lock()
	var b *batch[Req, Res]
	if n := len(c.queue); n > 0 && len(c.queue[n-1].calls) < max(c.MaxBatch, 1) {
		b = c.queue[n-1]
		b.calls = append(b.calls, call)
		c.mu.Unlock()
	} else {
		b = &batch[Req, Res]{calls: []*Call[Req, Res]{call}, done: make(chan struct{})}
		if c.running < max(c.Slots, 1) {
			c.running++
			c.mu.Unlock()
			go c.runFrom(b)
		} else {
			c.queue = append(c.queue, b)
			c.mu.Unlock()
		}
	}
	select {
	case <-b.done:
		return call.Res, call.Err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

// runFrom runs b, then every batch queued meanwhile, on one slot.
func (c *Combiner[Req, Res]) runFrom(b *batch[Req, Res]) {
	for b != nil {
		c.runOne(b)
		c.mu.Lock()
		if len(c.queue) > 0 {
			b = c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
		} else {
			b = nil
			c.running--
		}
		c.mu.Unlock()
	}
}

func (c *Combiner[Req, Res]) runOne(b *batch[Req, Res]) {
	defer close(b.done)
	live := make([]*Call[Req, Res], 0, len(b.calls))
	var latest time.Time
	bounded := true
	for _, call := range b.calls {
		if err := call.Ctx.Err(); err != nil {
			call.Err = err
			continue
		}
		live = append(live, call)
		if d, ok := call.Ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(latest) {
			latest = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.Background()
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	c.Run(ctx, live)
}
