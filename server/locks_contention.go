package server

import (
	"sync"
	"time"
)

// maxTrackedAcquires bounds the acquisitions a server follows across requests; past it, a
// refusal is counted as if it were its acquisition's first (over-counting beats unbounded memory).
const maxTrackedAcquires = 10000

// acquireTracker follows one acquisition across its requests. A client that waits longer than one
// request's long-poll (the Go client's Locker, `baton locks acquire --wait`, `baton run`) sends
// several requests with the same lease ID until it is granted or gives up; counted per request,
// one 3 s wait would add several contention failures. The tracker lets the server count one
// refusal per acquisition and time its whole wait. Only lease IDs the client chose are
// followed: a request without one is its own acquisition.
type acquireTracker struct {
	keep time.Duration // an acquisition not heard of for this long is forgotten

	mu   sync.Mutex
	byID map[string]*trackedAcquire
}

type trackedAcquire struct {
	first, last time.Time
}

func newAcquireTracker(keep time.Duration) *acquireTracker {
	return &acquireTracker{keep: keep, byID: map[string]*trackedAcquire{}}
}

func trackKey(key, leaseID string) string { return key + "\x00" + leaseID }

// refused records a refusal (held, cooldown) of the acquisition (key, leaseID) whose request was
// received at t. It reports whether this is the acquisition's first refusal, the one to count.
func (a *acquireTracker) refused(key, leaseID string, t time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := trackKey(key, leaseID)
	if e := a.byID[id]; e != nil {
		e.last = time.Now()
		return false
	}
	if len(a.byID) >= maxTrackedAcquires {
		a.sweep()
		if len(a.byID) >= maxTrackedAcquires {
			return true
		}
	}
	a.byID[id] = &trackedAcquire{first: t, last: time.Now()}
	return true
}

// granted forgets the acquisition and returns when its first request was received: t, that of
// the granted request, unless an earlier one was refused.
func (a *acquireTracker) granted(key, leaseID string, t time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := trackKey(key, leaseID)
	if e := a.byID[id]; e != nil {
		delete(a.byID, id)
		if time.Since(e.last) <= a.keep {
			return e.first
		}
	}
	return t
}

// sweep forgets the acquisitions not heard of for keep (their clients gave up). Under mu.
func (a *acquireTracker) sweep() {
	for id, e := range a.byID {
		if time.Since(e.last) > a.keep {
			delete(a.byID, id)
		}
	}
}
