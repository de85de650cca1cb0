package baton

import (
	"math/rand/v2"
	"time"

	"github.com/batonhq/baton/store"
)

// Bounds of DefaultBackoff.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Hour
)

// DefaultBackoff is the wait before retrying a job whose attempt number attempt (1 for the first)
// failed: DefaultBackoffBase * 2^(attempt-1), capped at DefaultBackoffMax, with full jitter in
// [d/2, d] so that jobs that failed together do not retry together.
func DefaultBackoff(attempt int) time.Duration {
	d := DefaultBackoffMax
	// 2^12 s is past the cap: no need to shift further (and overflow).
	if attempt < 13 {
		d = min(DefaultBackoffBase<<max(attempt-1, 0), DefaultBackoffMax)
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter calls a backoff function and keeps its answer within what a store accepts.
func retryAfter(backoff func(int) time.Duration, attempt int) time.Duration {
	return min(max(backoff(attempt), 0), store.MaxDelay)
}
