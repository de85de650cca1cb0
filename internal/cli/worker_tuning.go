package cli

import (
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// workerTuning checks --heartbeat-interval, --backoff-base and --backoff-max (each must be
// positive when given; an unset --heartbeat-interval is 0, the library's TTL/3) and returns the
// retry backoff, or a usage error naming the flag.
func workerTuning(changed func(string) bool, leaseTTL, heartbeat, base, maxWait time.Duration) (func(int) time.Duration, error) {
	for _, f := range []struct {
		name string
		val  time.Duration
	}{{"heartbeat-interval", heartbeat}, {"backoff-base", base}, {"backoff-max", maxWait}} {
		if f.val <= 0 && (changed(f.name) || f.name != "heartbeat-interval") {
			return nil, usagef("--%s must be positive (got %s)", f.name, f.val)
		}
	}
	if leaseTTL >= store.MinTTL && heartbeat > leaseTTL/3 {
		return nil, usagef("--heartbeat-interval %s is longer than a third of --lease-ttl (%s): a failed heartbeat must leave time for retries before the job's lease expires", heartbeat, leaseTTL/3)
	}
	if base > maxWait {
		return nil, usagef("--backoff-base %s is longer than --backoff-max %s", base, maxWait)
	}
	backoff, err := baton.ExponentialBackoff(base, maxWait)
	if err != nil { // not reached: the checks above are its rules
		return nil, usagef("%v", err)
	}
	return backoff, nil
}
