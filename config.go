package baton

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/store"
)

// Defaults of Config and of each acquisition.
const (
	DefaultTTL          = 15 * time.Second
	DefaultDriftFactor  = 0.01
	DefaultSafetyMargin = 100 * time.Millisecond
	DefaultPollInterval = time.Second
)

// Config tunes a Locker. The zero value of each field means its default.
type Config struct {
	// TTL is the default lease TTL (DefaultTTL). Each acquisition may override it with WithTTL.
	TTL time.Duration
	// DriftFactor bounds how much faster the store's clock may run than the holder's monotonic
	// clock, as a fraction of the TTL (DefaultDriftFactor). It shortens the holder's own view of
	// validity: start_of_request + TTL*(1-DriftFactor) - SafetyMargin.
	DriftFactor float64
	// SafetyMargin is subtracted from the holder's view of validity so that work stops before
	// the store could grant the key elsewhere (DefaultSafetyMargin).
	SafetyMargin time.Duration
	// PollInterval is the fallback poll of waiting Acquire calls, jittered by ±20%
	// (DefaultPollInterval). Waiters are normally woken by a push from the store.
	PollInterval time.Duration
	// Logger receives keepalive warnings. Default: slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.DriftFactor == 0 {
		c.DriftFactor = DefaultDriftFactor
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = DefaultSafetyMargin
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := store.ValidateTTL(c.TTL); err != nil {
		return c, err
	}
	if c.DriftFactor < 0 || c.DriftFactor >= 0.5 {
		return c, &InvalidArgumentError{Field: "drift_factor", Rule: fmt.Sprintf("must be in [0, 0.5) (got %g)", c.DriftFactor)}
	}
	if c.SafetyMargin < 0 || c.SafetyMargin > store.MinTTL/4 {
		return c, &InvalidArgumentError{Field: "safety_margin", Rule: fmt.Sprintf("must be in [0, %s] (got %s)", store.MinTTL/4, c.SafetyMargin)}
	}
	if c.PollInterval < 10*time.Millisecond {
		return c, &InvalidArgumentError{Field: "poll_interval", Rule: fmt.Sprintf("must be at least 10ms (got %s)", c.PollInterval)}
	}
	return c, nil
}

// grantedAfter is a lower bound, on this process's monotonic clock, of the instant a store
// granted a lease (or claimed a job) in a call that began at start: start plus what a store that
// waits itself says it waited before its granting attempt, shortened by the drift bound (the
// store side's clock may run fast), and never later than now (nothing was granted in the future).
func (c Config) grantedAfter(start time.Time, waited time.Duration) time.Time {
	if waited <= 0 {
		return start
	}
	t := start.Add(time.Duration(float64(waited) * (1 - c.DriftFactor)))
	if now := time.Now(); t.After(now) {
		return now
	}
	return t
}

// validity is how long after the start of a successful acquire or renew request the holder may
// consider the lease its own.
func (c Config) validity(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*(1-c.DriftFactor)) - c.SafetyMargin
}
