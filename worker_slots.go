package baton

import (
	"context"
	"sync"
	"sync/atomic"
)

// slots is a worker's capacity: how many handlers may run at once (Concurrency), how many
// claimed jobs may wait in hand for one of those to free (the local queue, queueRoom: none, or
// as many again while handlers are short), and how many jobs it may hold at once, running,
// waiting or ended and being reported (maxHeld). A claim reserves slots before it is sent, so
// that the claim loop and the completer's claims never take more than are free between them;
// each job it returns takes one reserved slot, and the rest are given back. A job's handler runs
// only while it holds one of capacity run tokens.
//
// Invariants: active never exceeds capacity plus the queue's room when it was last reserved,
// handlers running never exceed capacity, held never exceeds maxHeld, no count goes below
// zero, and with no claim in flight reserved is zero. Every change that frees room signals freed
// after the counts changed, so that a waiter that found no room and then waits on freed is woken.
type slots struct {
	capacity int
	// queueRoom is how many claimed jobs may wait for a run token: 0, or capacity while
	// handlers return sooner than a round trip to the store (see Worker.tuneQueue).
	queueRoom atomic.Int64
	// run holds one token per handler running: at most capacity.
	run chan struct{}
	// maxHeld bounds the jobs held at once. A slot frees when its handler returns, before the
	// attempt is reported (the report is often batched); but reports in flight are bounded too,
	// to three times as many as there are slots, or a worker whose handlers outrun its reports
	// would claim every claimable job while their completions queued, their leases' heartbeats
	// firing. With room for only as many again, a small worker of short jobs whose one batch was
	// in flight could not claim its free slots in that batch's round trip (see completerFlushers).
	maxHeld  int
	mu       sync.Mutex   // makes reserve atomic; giving room back needs no lock
	active   atomic.Int64 // jobs in hand whose handler has not returned (waiting or running), and slots reserved
	held     atomic.Int64 // jobs held (running or being reported), and slots reserved
	reserved atomic.Int64 // slots reserved by claims in flight
	freed    chan struct{}
}

func newSlots(capacity int) *slots {
	return &slots{capacity: capacity, maxHeld: 4 * capacity, run: make(chan struct{}, capacity), freed: make(chan struct{}, 1)}
}

// free is how many more jobs the worker may take now.
func (s *slots) free() int {
	return min(s.capacity+int(s.queueRoom.Load())-int(s.active.Load()), s.maxHeld-int(s.held.Load()))
}

// setQueueRoom sets how many claimed jobs may wait for a run token, signalling if that frees room.
func (s *slots) setQueueRoom(n int) {
	if old := s.queueRoom.Swap(int64(n)); int64(n) > old {
		s.signal()
	}
}

// startHandler waits for a run token, in the order jobs asked (a channel's waiting senders are
// served first come, first served), and says false if ctx ended first: the handler must not run.
func (s *slots) startHandler(ctx context.Context) bool {
	select {
	case s.run <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		<-s.run
		return false
	}
	return true
}

// handlers is how many handlers are running now.
func (s *slots) handlers() int { return len(s.run) }

// reserve takes up to want free slots for a claim about to be sent and returns how many.
func (s *slots) reserve(want int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(want, s.free())
	if n <= 0 {
		return 0
	}
	s.active.Add(int64(n))
	s.held.Add(int64(n))
	s.reserved.Add(int64(n))
	return n
}

// use turns one reserved slot into a running job's.
func (s *slots) use() { s.reserved.Add(-1) }

// unreserve gives back n reserved slots that the claim did not fill.
func (s *slots) unreserve(n int) {
	if n <= 0 {
		return
	}
	s.reserved.Add(-int64(n))
	s.held.Add(-int64(n))
	s.active.Add(-int64(n))
	s.signal()
}

// handlerDone frees the slot of a job whose handler returned (ran says it held a run token), or
// that never ran; the job is held until reported.
func (s *slots) handlerDone(ran bool) {
	if ran {
		<-s.run
	}
	s.active.Add(-1)
	s.signal()
}

// reported frees the hold of a job whose attempt was reported (or given up).
func (s *slots) reported() {
	s.held.Add(-1)
	s.signal()
}

// inHand is how many jobs are in hand whose handler has not returned, waiting for a run token or
// running (slots reserved by claims in flight excluded).
func (s *slots) inHand() int64 { return s.active.Load() - s.reserved.Load() }

// signal tells a waiter on freed that room may have freed. A signal already pending says so
// already.
func (s *slots) signal() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}
