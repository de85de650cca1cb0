package cli

import (
	"flag"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// workerTuning checks --heartbeat-interval, --backoff-base and --backoff-max (each must be
// positive when given; an unset --heartbeat-interval is 0, the library's TTL/3) and returns the
// retry backoff, or the exit code of a usage error naming the flag.
func workerTuning(c *command, leaseTTL, heartbeat, base, maxWait time.Duration) (func(int) time.Duration, int, bool) {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, f := range []struct {
		name string
		val  time.Duration
	}{{"heartbeat-interval", heartbeat}, {"backoff-base", base}, {"backoff-max", maxWait}} {
		if f.val <= 0 && (set[f.name] || f.name != "heartbeat-interval") {
			return nil, c.usageError("--%s must be positive (got %s)", f.name, f.val), false
		}
	}
	if leaseTTL >= store.MinTTL && heartbeat > leaseTTL/3 {
		return nil, c.usageError("--heartbeat-interval %s is longer than a third of --lease-ttl (%s): a failed heartbeat must leave time for retries before the job's lease expires", heartbeat, leaseTTL/3), false
	}
	if base > maxWait {
		return nil, c.usageError("--backoff-base %s is longer than --backoff-max %s", base, maxWait), false
	}
	backoff, err := baton.ExponentialBackoff(base, maxWait)
	if err != nil { // not reached: the checks above are its rules
		return nil, c.usageError("%v", err), false
	}
	return backoff, 0, true
}
