package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/wire"
)

// A worker shutting down ends the wait of its claim with POST /v1/jobs/claim/stop rather than by
// abandoning the claim's request. An abandoned request cannot be answered: a job the store
// claimed for it in the instant the worker gave up would stay running with nobody to run it
// until its lease expired, and then be reaped as a timed-out attempt. A stopped wait answers
// like one that ran out: the jobs claimed, maybe none, to a client still reading.

// maxStoppedEarly bounds the stops remembered for claims that have not arrived yet.
const maxStoppedEarly = 4096

// waitKey names a waiting claim: a client's wait_id within its principal, so that nobody
// stops another principal's claim.
type waitKey struct{ owner, id string }

// claimWaits are the claims waiting in this server that their client named.
type claimWaits struct {
	mu      sync.Mutex
	waiting map[waitKey]*claimWait
	// early are stops that found no claim waiting, until when they apply: the stop's request
	// may overtake its claim's (two connections). A claim named by one does not wait.
	early map[waitKey]time.Time
	// keep is how long an early stop is remembered: the longest wait a claim may ask for.
	keep time.Duration
}

// claimWait is one name's waits (a client's retry may reuse a name while its first request is
// still on its way out); stop ends them all.
type claimWait struct {
	ctx    context.Context
	cancel context.CancelFunc
	n      int
}

func newClaimWaits(keep time.Duration) *claimWaits {
	return &claimWaits{waiting: map[waitKey]*claimWait{}, early: map[waitKey]time.Time{}, keep: keep}
}

// start registers a named wait: the context ends when the wait is stopped; done unregisters it.
func (c *claimWaits) start(k waitKey) (stopped context.Context, done func()) {
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
		w = &claimWait{}
		w.ctx, w.cancel = context.WithCancel(context.Background())
		c.waiting[k] = w
	}
	w.n++
	return w.ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if w.n--; w.n == 0 {
			w.cancel()
			if c.waiting[k] == w {
				delete(c.waiting, k)
			}
		}
	}
}

// stop ends the named waits, or, if none waits, makes the name's next claim not wait.
func (c *claimWaits) stop(k waitKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.waiting[k]; w != nil {
		w.cancel()
		delete(c.waiting, k)
		return true
	}
	now := time.Now()
	if len(c.early) >= maxStoppedEarly {
		for k, until := range c.early {
			if !now.Before(until) {
				delete(c.early, k)
			}
		}
		for k := range c.early { // still full: forget any (that claim then waits its full wait)
			if len(c.early) < maxStoppedEarly {
				break
			}
			delete(c.early, k)
		}
	}
	c.early[k] = now.Add(c.keep)
	return false
}

// waitIDParam checks a wait_id: empty (not named) or 1-64 of A-Z a-z 0-9 _ -.
func waitIDParam(field, id string, required bool) *problem {
	if id == "" {
		if required {
			return invalidArg(field, "must not be empty")
		}
		return nil
	}
	if len(id) > wire.MaxWaitIDLen {
		return invalidArg(field, fmt.Sprintf("must be at most %d bytes (got %d)", wire.MaxWaitIDLen, len(id)))
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return invalidArg(field, fmt.Sprintf("must hold only A-Z a-z 0-9 _ - (got %q)", r))
		}
	}
	return nil
}

// stopClaimWait ends the wait of the caller's claim named wait_id (POST /v1/jobs/claim/stop).
func (s *Server) stopClaimWait(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.ClaimStopRequest
	if !decode(w, r, &req) {
		return
	}
	if prob := waitIDParam("wait_id", req.WaitID, true); prob != nil {
		writeProblem(w, prob)
		return
	}
	stopped := s.claimWaits.stop(waitKey{owner: s.owner(who), id: req.WaitID})
	writeJSON(w, http.StatusOK, wire.ClaimStopResponse{Stopped: stopped})
}
