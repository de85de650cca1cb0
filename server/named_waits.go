package server

import (
	"context"
	"sync"
	"time"
)

// Waits that their client may end by name from another request: a claim's (claim_stop.go) and a
// waiting acquire's (line_leave.go).

// maxStoppedEarly bounds the stops remembered for waits that have not arrived yet.
const maxStoppedEarly = 4096

// waitKey names a wait within its principal, so that nobody stops another principal's wait.
type waitKey struct{ owner, id string }

// namedWaits are the waits in this server that their client named.
type namedWaits struct {
	mu      sync.Mutex
	waiting map[waitKey]*namedWait
	// early are stops that found no wait, until when they apply: the stop's request may
	// overtake its wait's (two connections). A wait named by one does not wait.
	early map[waitKey]time.Time
	// keep is how long an early stop is remembered: the longest wait a request may ask for.
	keep time.Duration
}

// namedWait is one name's waits (a client's retry may reuse a name while its first request is
// still on its way out); stop ends them all.
type namedWait struct {
	ctx    context.Context
	cancel context.CancelFunc
	n      int
	ended  chan struct{} // closed when the last of them is done
}

func newNamedWaits(keep time.Duration) *namedWaits {
	return &namedWaits{waiting: map[waitKey]*namedWait{}, early: map[waitKey]time.Time{}, keep: keep}
}

// start registers a named wait: the context ends when the wait is stopped; done unregisters it.
func (c *namedWaits) start(k waitKey) (stopped context.Context, done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.early[k]; ok {
		delete(c.early, k)
		if time.Now().Before(until) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, func() {}
		}
	}
	w := c.waiting[k]
	if w == nil {
		w = &namedWait{ended: make(chan struct{})}
		w.ctx, w.cancel = context.WithCancel(context.Background())
		c.waiting[k] = w
	}
	w.n++
	return w.ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if w.n--; w.n == 0 {
			w.cancel()
			close(w.ended)
			if c.waiting[k] == w {
				delete(c.waiting, k)
			}
		}
	}
}

// stop ends the named waits and returns a channel closed once they are all done; if none waits,
// it makes the name's next wait not wait, and returns nil.
func (c *namedWaits) stop(k waitKey) (ended <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.waiting[k]; w != nil {
		w.cancel()
		delete(c.waiting, k)
		return w.ended
	}
	now := time.Now()
	if len(c.early) >= maxStoppedEarly {
		for k, until := range c.early {
			if !now.Before(until) {
				delete(c.early, k)
			}
		}
		for k := range c.early { // still full: forget any (that wait then waits in full)
			if len(c.early) < maxStoppedEarly {
				break
			}
			delete(c.early, k)
		}
	}
	c.early[k] = now.Add(c.keep)
	return nil
}
