package server

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// Large bodies are decoded under a budget of bytes: a job batch of up to MaxJobBatchBodyBytes
// costs about three times its size in memory while it is decoded, written and answered, and
// without a bound each client sending one at once added that much. The budget admits the
// declared Content-Length of each (MaxJobBatchBodyBytes if unknown), so small batches pass
// together and the largest go one at a time, first come first served. A request that finds
// batchQueue others already waiting is answered 503 overloaded with Retry-After, like the
// admission gate's; a waiting request has not read its body yet, so it holds no memory.
const (
	batchBudget = MaxJobBatchBodyBytes
	batchQueue  = 16
)

// bodyBudget bounds the bytes of large bodies decoded at once.
type bodyBudget struct {
	sem      *semaphore.Weighted
	size     int64
	waiting  atomic.Int64
	maxQueue int64
}

func newBodyBudget(size int64, maxQueue int, reg prometheus.Registerer) *bodyBudget {
	b := &bodyBudget{sem: semaphore.NewWeighted(size), size: size, maxQueue: int64(maxQueue)}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "baton_http_batch_bodies_waiting",
		Help: "Job batch requests waiting for room to read their bodies (past 16, they are answered 503 overloaded).",
	}, func() float64 { return float64(b.waiting.Load()) }))
	return b
}

// acquire waits for room for a body of n bytes and returns the function that gives it back, or
// errOverloaded when the queue is full, or the context's error.
func (b *bodyBudget) acquire(ctx context.Context, n int64) (func(), error) {
	n = min(max(n, 1), b.size)
	if !b.sem.TryAcquire(n) {
		if b.waiting.Add(1) > b.maxQueue {
			b.waiting.Add(-1)
			return nil, errOverloaded
		}
		err := b.sem.Acquire(ctx, n)
		b.waiting.Add(-1)
		if err != nil {
			return nil, err
		}
	}
	return func() { b.sem.Release(n) }, nil
}

// admitBody waits for room in budget for r's body (of at most limit bytes), then starts the
// body deadline afresh: the wait was the server's, not the client's. It answers the problem
// itself and returns false when the request is refused (or its client went away).
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request, budget *bodyBudget, limit int64) (func(), bool) {
	n := r.ContentLength
	if n < 0 || n > limit {
		n = limit
	}
	release, err := budget.acquire(r.Context(), n)
	if err != nil {
		if errors.Is(err, errOverloaded) {
			p := newProblem(http.StatusServiceUnavailable, "overloaded", "too many large request bodies wait to be read; retry later")
			p.retryAfter, p.RetryAfterMs = overloadRetryAfter, ms(overloadRetryAfter)
			writeProblem(w, p)
		}
		return nil, false
	}
	if b, ok := r.Body.(*deadlineBody); ok && b.timed {
		b.deadline = time.Now().Add(s.cfg.BodyTimeout)
		_ = b.rc.SetReadDeadline(b.deadline)
	}
	return release, true
}
