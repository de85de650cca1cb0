package store

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors. Package baton re-exports them; test with errors.Is.
var (
	// ErrLockHeld: the key is held by another lease. The concrete error is *LockHeldError.
	ErrLockHeld = errors.New("baton: lock held")
	// ErrNotHeld: the lease named in a renew or release is not the live lease on its key.
	ErrNotHeld = errors.New("baton: lease not held")
	// ErrNotFound: no live lease on the key.
	ErrNotFound = errors.New("baton: not found")
	// ErrResting: the key is free but resting, after a release (cooldown) or an expiry or a
	// force-release (lock-delay). The concrete error is *RestingError.
	ErrResting = errors.New("baton: key resting")
	// ErrInvalidArgument: bad input. The concrete error is *InvalidArgumentError.
	ErrInvalidArgument = errors.New("baton: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("baton: store closed")
)

// LockHeldError says who holds a key. It matches ErrLockHeld with errors.Is.
type LockHeldError struct {
	Key       string
	Holder    string
	Token     uint64
	ExpiresAt time.Time // on the store's clock
	// RetryAfter is how long, on the store's clock, until the lease expires unless renewed.
	RetryAfter time.Duration
	// Ahead is how many tickets wait before the caller in the key's line (LineWaiter): lock
	// requests and ready jobs that arrived first. A free key refuses a caller with tickets ahead;
	// Holder then names the first of them (a lock ticket's holder, or JobHolder of a job) and
	// Token is zero.
	Ahead int
	// Resource is the key that refused the request, when it is one of the request's Resources
	// rather than Key. Shared says its holder holds it shared (with others, perhaps).
	Resource string
	Shared   bool
	// Limit names a full limit that refused the request: InUse of Capacity units are held
	// (Holder is one of the holders), and Ahead tickets wait before the caller in its line.
	Limit    string
	InUse    int
	Capacity int
	// Related is the key whose holder, rest or waiting ticket refused the request when it is not
	// the requested key itself (Key, or Resource) but a related one in its tree (an ancestor or a
	// descendant, see trees.go): Holder, Token and ExpiresAt are then its holder's.
	Related string
}

func (e *LockHeldError) Error() string {
	if e.Limit != "" {
		msg := fmt.Sprintf("baton: limit %q full: %d of %d", e.Limit, e.InUse, e.Capacity)
		if e.Holder != "" {
			msg += fmt.Sprintf(", held by %q", e.Holder)
		}
		if e.Ahead > 0 {
			msg += fmt.Sprintf("; %d ahead in its line", e.Ahead)
		}
		return msg
	}
	if e.Resource != "" {
		c := *e
		c.Key, c.Resource = e.Resource, ""
		return c.Error()
	}
	if e.Related != "" {
		c := *e
		c.Key, c.Related = e.Related, ""
		return fmt.Sprintf("%s, which is related to %q in its tree", c.Error(), e.Key)
	}
	if e.Token == 0 && e.Ahead > 0 {
		return fmt.Sprintf("baton: lock %q is free but %d ahead in its line, first %q", e.Key, e.Ahead, e.Holder)
	}
	mode := ""
	if e.Shared {
		mode = " shared"
	}
	msg := fmt.Sprintf("baton: lock %q held%s by %q (token %d) until %s (in %s)",
		e.Key, mode, e.Holder, e.Token, e.ExpiresAt.UTC().Format(time.RFC3339), e.RetryAfter.Round(time.Millisecond))
	if e.Ahead > 0 {
		msg += fmt.Sprintf("; %d ahead in its line", e.Ahead)
	}
	return msg
}

// Is reports whether target is ErrLockHeld.
func (e *LockHeldError) Is(target error) bool { return target == ErrLockHeld }

// The reasons of a rest.
const (
	ReasonCooldown  = "cooldown"   // after a clean release
	ReasonLockDelay = "lock-delay" // after an expiry or a force-release
	// ReasonResourceCooldown: after a job whose kind has a resource cooldown
	// (Kind.ResourceCooldown), on a store where leases and jobs share one resource.
	ReasonResourceCooldown = "resource-cooldown"
	// ReasonFailover: the store's database was promoted from a replica (a PostgreSQL failover)
	// less than the store's failover quarantine ago; leases granted before it could still be live.
	ReasonFailover = "failover"
	// ReasonRate: a rate of a limit or of a key prefix that the request would count in is
	// reached (RestingError.Rate says which); the request may be granted when its window frees.
	ReasonRate = "rate"
)

// JobHolder is the holder a lease refusal names when a job attempt holds the key: "job:<id>".
// Where leases and jobs share one store (SQLite, PostgreSQL), a key is one resource: a live lease
// and a running job attempt on it exclude each other.
func JobHolder(id int64) string { return "job:" + strconv.FormatInt(id, 10) }

// RestingError says a key is resting, why, and for how long. It matches ErrResting with
// errors.Is.
type RestingError struct {
	Key       string
	Reason    string        // ReasonCooldown, ReasonLockDelay, ReasonResourceCooldown, ReasonFailover or ReasonRate
	Remaining time.Duration // on the store's clock
	// Rate is the rate reached, for ReasonRate.
	Rate *RateWait
}

func (e *RestingError) Error() string {
	if e.Rate != nil {
		return fmt.Sprintf("baton: lock %q unavailable (rate %s of %s reached) for another %s", e.Key, e.Rate.Rate, e.Rate.Of(), e.Remaining.Round(time.Millisecond))
	}
	return fmt.Sprintf("baton: lock %q unavailable (%s) for another %s", e.Key, e.Reason, e.Remaining.Round(time.Millisecond))
}

// Is reports whether target is ErrResting.
func (e *RestingError) Is(target error) bool { return target == ErrResting }

// InvalidArgumentError names the field and the rule it broke. It matches ErrInvalidArgument.
type InvalidArgumentError struct {
	Field string
	Rule  string
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("baton: invalid argument: %s %s", e.Field, e.Rule)
}

// Is reports whether target is ErrInvalidArgument.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

func invalid(field, rule string, args ...any) error {
	return &InvalidArgumentError{Field: field, Rule: fmt.Sprintf(rule, args...)}
}
