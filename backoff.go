package baton

import (
	"fmt"
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
	return exponentialBackoff(DefaultBackoffBase, DefaultBackoffMax, attempt)
}

// ExponentialBackoff returns a WorkerConfig.Backoff like DefaultBackoff with other bounds: base *
// 2^(attempt-1), capped at maxWait, with full jitter in [d/2, d]. base and maxWait must be
// positive and base at most maxWait; otherwise it returns an *InvalidArgumentError naming
// "backoff_base" or "backoff_max".
func ExponentialBackoff(base, maxWait time.Duration) (func(attempt int) time.Duration, error) {
	switch {
	case base <= 0:
		return nil, &InvalidArgumentError{Field: "backoff_base", Rule: fmt.Sprintf("must be positive (got %s)", base)}
	case maxWait <= 0:
		return nil, &InvalidArgumentError{Field: "backoff_max", Rule: fmt.Sprintf("must be positive (got %s)", maxWait)}
	case base > maxWait:
		return nil, &InvalidArgumentError{Field: "backoff_base",
			Rule: fmt.Sprintf("must not exceed backoff_max, %s (got %s)", maxWait, base)}
	}
	return func(attempt int) time.Duration { return exponentialBackoff(base, maxWait, attempt) }, nil
}

func exponentialBackoff(base, maxWait time.Duration, attempt int) time.Duration {
	d := base
	for n := 1; n < attempt && d < maxWait; n++ { // double until the cap, without overflowing
		if d > maxWait/2 {
			d = maxWait
			break
		}
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + rand.N(d/2+1)
}

// retryAfter calls a backoff function and keeps its answer within what a store accepts.
func retryAfter(backoff func(int) time.Duration, attempt int) time.Duration {
	return min(max(backoff(attempt), 0), store.MaxDelay)
}
