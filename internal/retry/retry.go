// Package retry holds Baton's rules for trying a store call again: which errors may go away by
// themselves, how long to wait before the next try, and how to spread those waits so that
// callers refused together do not come back together. Every retry loop of the library, the
// worker and the server takes its waits from here.
//
// A job's retry after its handler failed is a different matter, the job's policy: see
// baton.DefaultBackoff.
package retry

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/batonhq/baton/store"
)

// Transient reports whether a store error may go away by itself: anything but the errors the
// store contract names, and but an error that says itself it is not temporary (the HTTP
// client's answers such as unauthorized or forbidden).
func Transient(err error) bool {
	for _, e := range []error{store.ErrNotHeld, store.ErrNotFound, store.ErrInvalidArgument, store.ErrClosed, store.ErrJobState} {
		if errors.Is(err, e) {
			return false
		}
	}
	// Not net.Error's Temporary, which calls a refused connection permanent.
	var t store.RetryableError
	if errors.As(err, &t) && !t.Retryable() {
		return false
	}
	return true
}

// Jitter spreads d by ±20%, so that many waiters do not poll or retry in step.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d*4/5 + rand.N(d*2/5+1)
}

// Held is the wait before retrying a failed call that keeps a held lease or job attempt (a
// renew, a heartbeat, a report) whose TTL is ttl: a tenth of the TTL, within [50 ms, 1 s],
// jittered. It is short, and ignores a server's Retry-After: a held lease has only until its
// local deadline, and losing it costs more than the load of a retry.
func Held(ttl time.Duration) time.Duration {
	return Jitter(min(max(ttl/10, 50*time.Millisecond), time.Second))
}

// Backoff is the wait of a waiter (an Acquire, a claim loop) after its failures-th transient
// failure in a row: a tenth of its poll interval, doubling with each failure, at most poll,
// jittered.
func Backoff(poll time.Duration, failures int) time.Duration {
	return Jitter(min(poll/10<<min(max(failures, 1)-1, 10), poll))
}

// After is how long err asks its caller to stay away (an overloaded server's 503 or 429 with
// Retry-After, the Go client's *client.ProblemError), spread by up to a quarter more so that
// callers refused together do not come back together; 0 when err does not say. A waiter waits
// at least that long; keepalive does not (see Held).
func After(err error) time.Duration {
	var h store.RetryAfterHinter
	if !errors.As(err, &h) {
		return 0
	}
	d := h.RetryAfterHint()
	if d <= 0 {
		return 0
	}
	return d + Jitter(d)/5
}
