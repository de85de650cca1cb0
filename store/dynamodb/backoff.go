package dynamodb

import (
	"math/rand/v2"
	"time"
)

// jitter is the backoff between attempts of one request: a uniformly random delay up to
// base*2^attempt, capped at max ("full jitter"). The SDK's default starts at up to a second,
// longer than a lock's whole hand-off; DynamoDB's own guidance for throttling is a short base
// with exponential growth.
type jitter struct {
	base, max time.Duration
}

func (j jitter) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	ceil := j.max
	if attempt < 30 {
		ceil = min(j.base<<attempt, j.max)
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1)), nil
}
