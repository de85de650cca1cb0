package baton

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonhq/baton/store"
)

// An Option changes one acquisition.
type Option func(*acquireOptions)

type acquireOptions struct {
	holder      string
	ttl         time.Duration
	metadata    json.RawMessage
	metadataErr error
	waitTimeout time.Duration
	noKeepalive bool
	stopGrace   time.Duration
	cooldown    time.Duration
	lockDelay   time.Duration
	first       string // the break-glass reason; "" for a plain request
	shared      bool
	resources   []string
	limits      []string
}

// WithHolder names the holder (a worker or job id). Two acquisitions with the same holder share
// the lease: the second returns the first, renewed. By default every acquisition gets a holder
// unique to its process and call ("host:pid:random").
func WithHolder(holder string) Option { return func(o *acquireOptions) { o.holder = holder } }

// WithTTL sets the lease TTL, between 1 s and 24 h. Default: Config.TTL.
func WithTTL(ttl time.Duration) Option { return func(o *acquireOptions) { o.ttl = ttl } }

// WithMetadata stores a JSON object (at most 4 KiB once encoded) with the lease. v may be a
// json.RawMessage, a map or a struct.
func WithMetadata(v any) Option {
	return func(o *acquireOptions) {
		raw, err := json.Marshal(v)
		if err != nil {
			o.metadataErr = &InvalidArgumentError{Field: "metadata", Rule: fmt.Sprintf("must encode as JSON: %v", err)}
			return
		}
		o.metadata = raw
	}
}

// WithWaitTimeout bounds how long Acquire waits for the key (0: until ctx ends).
func WithWaitTimeout(d time.Duration) Option { return func(o *acquireOptions) { o.waitTimeout = d } }

// WithKeepalive turns the background renewal on (default) or off. Without it the lease's context
// ends at its local deadline unless the caller renews.
func WithKeepalive(on bool) Option { return func(o *acquireOptions) { o.noKeepalive = !on } }

// WithStopGrace says how long the work under the lease needs to stop once told to (a child
// process's SIGTERM to SIGKILL grace). When renews fail, the lease's StopContext is cancelled
// (cause ErrLeaseLost) d before the local deadline, so that the work has stopped by the
// deadline; a renew that succeeds first moves both on. 0 (the default) stops at the deadline
// itself; at most a third of the TTL, so that keepalive (every TTL/3) has time to renew before.
func WithStopGrace(d time.Duration) Option { return func(o *acquireOptions) { o.stopGrace = d } }

// WithCooldown keeps the key unavailable for d after this lease is cleanly released (ErrResting).
func WithCooldown(d time.Duration) Option { return func(o *acquireOptions) { o.cooldown = d } }

// WithLockDelay keeps the key unavailable for d after this lease expires or is force-released,
// so that a stalled holder's in-flight writes drain before the next holder starts.
func WithLockDelay(d time.Duration) Option { return func(o *acquireOptions) { o.lockDelay = d } }

// WithFirst puts the request before every other waiting request and job of the key (break-glass),
// on a store with a line (SQLite, PostgreSQL; through a server, admins only). It still waits for
// the current holder. reason is required, and recorded with the request in the audit log
// (ticket_first).
func WithFirst(reason string) Option { return func(o *acquireOptions) { o.first = reason } }

// WithShared holds the key (and WithResources' keys) in shared mode: together with any number of
// other shared holders, never with an exclusive one. A waiting exclusive request stops later
// shared ones from overtaking it. Each shared holder has its own lease and token. SQLite and
// PostgreSQL only; other stores refuse it with ErrUnsupported.
func WithShared() Option { return func(o *acquireOptions) { o.shared = true } }

// WithResources holds keys together with the acquired key, all or nothing, in one step and under
// one token (at most 16). The lease waits in each key's line; requests for overlapping sets
// never deadlock, in whatever order they name them. SQLite and PostgreSQL only.
func WithResources(keys ...string) Option {
	return func(o *acquireOptions) { o.resources = append(o.resources, keys...) }
}

// WithLimits takes one unit of each named limit with the grant (at most 16). A limit is a
// capacity set by an admin (Locker.SetLimit, baton limits set); a grant waits while a limit is
// full. A lock on a limit alone is a counting semaphore: Acquire(ctx, "gpu-pool",
// WithShared(), WithLimits("gpu-pool")). SQLite and PostgreSQL only.
func WithLimits(names ...string) Option {
	return func(o *acquireOptions) { o.limits = append(o.limits, names...) }
}

// checkStopGrace checks a stop-grace against the TTL named ttlField: at most a third of it, so
// that renews (every TTL/3) have time to succeed before the work is told to stop.
func checkStopGrace(grace, ttl time.Duration, ttlField string) error {
	if grace < 0 || grace > ttl/3 {
		return &InvalidArgumentError{Field: "stop_grace",
			Rule: fmt.Sprintf("must be between 0 and a third of %s, %s (got %s)", ttlField, ttl/3, grace)}
	}
	return nil
}

func (l *Locker) params(key string, opts []Option) (*store.AcquireParams, acquireOptions, error) {
	o := acquireOptions{ttl: l.cfg.TTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.metadataErr != nil {
		return nil, o, o.metadataErr
	}
	if o.waitTimeout < 0 {
		return nil, o, &InvalidArgumentError{Field: "wait_timeout", Rule: "must not be negative"}
	}
	holder := o.holder
	if holder == "" {
		holder = l.uniqueHolder()
	}
	p := &store.AcquireParams{
		Key: key, LeaseID: newID(), Holder: holder, TTL: o.ttl,
		Metadata: o.metadata, Cooldown: o.cooldown, LockDelay: o.lockDelay,
		First: o.first != "", FirstReason: o.first,
		Shared: o.shared, Resources: o.resources, Limits: o.limits,
	}
	if err := p.Validate(); err != nil {
		return nil, o, err
	}
	if err := checkStopGrace(o.stopGrace, o.ttl, "ttl"); err != nil {
		return nil, o, err
	}
	return p, o, nil
}
