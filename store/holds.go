package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Beyond one at a time: a lease may hold its key shared with other shared holders
// (AcquireParams.Shared), hold several keys at once (AcquireParams.Resources), and take one unit of
// each of a set of limits (AcquireParams.Limits). Each is granted all or nothing in one atomic
// step, with one token drawn from the store-wide sequence, greater than every earlier token of
// each of its keys and limits. A store that keeps these implements Limiter; every other store
// refuses such a request with *UnsupportedError, never granting a plain exclusive lease instead.
//
// The rules of the line (LineWaiter), per key and per limit, in the order of arrival:
//   - An exclusive request is granted when its key has no holder and no ticket before it.
//   - A shared request is granted when its key has no exclusive holder and no exclusive ticket
//     (nor ready job) before it: shared requests behind a shared front go together, and a waiting
//     exclusive one stops later shared ones from overtaking it.
//   - A limit of capacity N grants a unit when the units in use plus the live tickets before the
//     request stay below N: a grant never takes a unit that an earlier waiter could use.
//
// A request that names several keys and limits waits in the line of each, with one arrival for
// all of them; every line orders its tickets by that arrival. So the request that arrived first
// among all waiting ones is first in every line it is in, and is granted as soon as its holders
// end: waiting requests never wait for each other in a cycle (no deadlock), however their sets
// overlap and in whatever order they name them.

// Limits of the requests.
const (
	// MaxResources bounds AcquireParams.Resources.
	MaxResources = 16
	// MaxLimits bounds AcquireParams.Limits.
	MaxLimits = 16
	// MaxLimitCapacity bounds a limit's capacity.
	MaxLimitCapacity = 1_000_000
)

// ErrUnsupported: the store cannot do what the request asks. The concrete error is
// *UnsupportedError.
var ErrUnsupported = errors.New("baton: not supported by this store")

// UnsupportedError names the store and the feature it lacks. It matches ErrUnsupported.
type UnsupportedError struct {
	Store   string // "redis", "etcd", ...
	Feature string // "shared mode", "limits", "several resources"
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("baton: the %s store does not support %s (SQLite and PostgreSQL do)", e.Store, e.Feature)
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Beyond reports whether p asks for more than one exclusive key: shared mode, extra resources or
// limits.
func (p *AcquireParams) Beyond() bool {
	return p.Shared || len(p.Resources) > 0 || len(p.Limits) > 0
}

// RefuseBeyond is what a store without Limiter answers a request that Beyond reports: an
// *UnsupportedError naming the store and the first feature asked for; nil for a plain request.
func RefuseBeyond(storeName string, p *AcquireParams) error {
	switch {
	case p.Shared:
		return &UnsupportedError{Store: storeName, Feature: "shared mode"}
	case len(p.Resources) > 0:
		return &UnsupportedError{Store: storeName, Feature: "several resources"}
	case len(p.Limits) > 0:
		return &UnsupportedError{Store: storeName, Feature: "limits"}
	}
	return nil
}

// Keys are the keys p holds: Key, then Resources.
func (p *AcquireParams) Keys() []string {
	return append([]string{p.Key}, p.Resources...)
}

// LimitLine is the key of limit name's line and of its units' holds in a store: no key can equal
// it (keys hold no control characters).
func LimitLine(name string) string { return "\x1e" + name }

// HoldMode is the mode of the request's holds and tickets of its keys: "shared" or "exclusive".
func (p *AcquireParams) HoldMode() string {
	if p.Shared {
		return "shared"
	}
	return "exclusive"
}

// Lines are the lines a request waits in: its keys', then its limits' (LimitLine).
func (p *AcquireParams) Lines() []string {
	out := p.Keys()
	for _, l := range p.Limits {
		out = append(out, LimitLine(l))
	}
	return out
}

// validateBeyond checks Resources and Limits: at most MaxResources and MaxLimits, each a valid
// name, none twice (and no resource equal to Key).
func (p *AcquireParams) validateBeyond() error {
	if len(p.Resources) > MaxResources {
		return invalid("resources", "must name at most %d extra resources (got %d)", MaxResources, len(p.Resources))
	}
	if len(p.Limits) > MaxLimits {
		return invalid("limits", "must name at most %d limits (got %d)", MaxLimits, len(p.Limits))
	}
	for i, r := range p.Resources {
		if err := validateName("resources", r, MaxKeyLen); err != nil {
			return err
		}
		if r == p.Key || slices.Contains(p.Resources[:i], r) {
			return invalid("resources", "must not name a key twice (%q)", r)
		}
	}
	for i, l := range p.Limits {
		if err := ValidateLimitName(l); err != nil {
			return err
		}
		if slices.Contains(p.Limits[:i], l) {
			return invalid("limits", "must not name a limit twice (%q)", l)
		}
	}
	return nil
}

// ValidateLimitName checks a limit's name: the rules of a key.
func ValidateLimitName(name string) error { return validateNameField("limits", name) }

func validateNameField(field, name string) error { return validateName(field, name, MaxKeyLen) }

// ValidateLimitCapacity checks a limit's capacity: 1..MaxLimitCapacity.
func ValidateLimitCapacity(n int) error {
	if n < 1 || n > MaxLimitCapacity {
		return invalid("capacity", "must be between 1 and %d (got %d)", MaxLimitCapacity, n)
	}
	return nil
}

// Limiter is implemented by stores that keep limits, shared holders and requests for several keys
// (SQLite, PostgreSQL): their Acquire grants what AcquireParams.Shared, Resources and Limits ask.
type Limiter interface {
	// SetLimit creates the limit p.Name or changes its capacity. Lowering it below its use
	// evicts nobody: new grants wait until the use drops below the new capacity.
	SetLimit(ctx context.Context, p *SetLimitParams) (*Limit, error)
	// DeleteLimit deletes a limit that no live lease holds a unit of; ErrNotFound if there is
	// none, *LimitInUseError while it is held.
	DeleteLimit(ctx context.Context, p *DeleteLimitParams) error
	// Limits lists limits in name order after p.After, at most p.Limit, each with its use,
	// holders and the number of tickets in its line, read at one instant.
	Limits(ctx context.Context, p *LimitsParams) ([]*Limit, error)
}

// SetLimitParams are the inputs of Limiter.SetLimit.
type SetLimitParams struct {
	Name     string
	Capacity int
	// Rate, if set, bounds the grants of the limit's units: at most Rate.Max per sliding
	// window (rate.go); nil: none (a set without it removes the limit's rate).
	Rate  *Rate
	Actor string // who set it, for the audit log
}

// Validate checks every field.
func (p *SetLimitParams) Validate() error {
	err := firstError(ValidateLimitName(p.Name), ValidateLimitCapacity(p.Capacity))
	if err == nil && p.Rate != nil {
		err = p.Rate.Validate("rate")
	}
	return err
}

// DeleteLimitParams are the inputs of Limiter.DeleteLimit.
type DeleteLimitParams struct {
	Name  string
	Actor string
}

// Validate checks every field.
func (p *DeleteLimitParams) Validate() error { return ValidateLimitName(p.Name) }

// LimitsParams are the inputs of Limiter.Limits.
type LimitsParams struct {
	Name  string // only this limit, if set
	After string // only names greater than this one
	Limit int    // 1..MaxListLimit
}

// Validate checks every field.
func (p *LimitsParams) Validate() error {
	if p.Name != "" {
		if err := ValidateLimitName(p.Name); err != nil {
			return err
		}
	}
	return ValidateListLimit(p.Limit)
}

// Limit is a named capacity and its use.
type Limit struct {
	Name     string
	Capacity int
	// Rate bounds the grants of its units per sliding window; nil if none.
	Rate *Rate
	// InUse is the number of live leases that hold a unit; it may exceed Capacity after the
	// capacity was lowered, until they end.
	InUse int
	// Holders are the live leases that hold a unit (their Key is the lease's first key), in
	// grant order; at most MaxListLimit. Each names only this limit in Limits, with its slot.
	Holders []*Lease
	// Waiting is the number of live tickets in the limit's line.
	Waiting   int
	UpdatedAt time.Time
}

// LimitInUseError refuses to delete a limit that live leases hold. It matches ErrLimitInUse.
type LimitInUseError struct {
	Name  string
	InUse int
}

// ErrLimitInUse: a limit that live leases hold cannot be deleted.
var ErrLimitInUse = errors.New("baton: limit in use")

func (e *LimitInUseError) Error() string {
	return fmt.Sprintf("baton: limit %q is held by %d leases; delete it once they end", e.Name, e.InUse)
}

// Is reports whether target is ErrLimitInUse.
func (e *LimitInUseError) Is(target error) bool { return target == ErrLimitInUse }

// UnknownLimit is the error of a request that names a limit the store does not have.
func UnknownLimit(name string) error {
	return invalid("limits", "names an unknown limit %q (create it with baton limits set)", name)
}

// AddHold adds one hold of the lease, as a store reads it back, to l: a unit of a limit (mode
// "unit", key its LimitLine) in slot, or a key held in mode ("exclusive" or "shared"), whose
// metadata md the lease carries if it is l.Key. Call SortHolds once all are in.
func (l *Lease) AddHold(key, mode string, slot int, md json.RawMessage) {
	switch {
	case mode == "unit":
		name := key[len(LimitLine("")):]
		l.Limits = append(l.Limits, name)
		if l.Slots == nil {
			l.Slots = make(map[string]int)
		}
		l.Slots[name] = slot
	case key == l.Key:
		l.Shared = mode == "shared"
		if len(md) > 0 {
			l.Metadata = md
		}
	default:
		l.Shared = mode == "shared"
		l.Resources = append(l.Resources, key)
	}
}

// SortHolds puts Resources and Limits in name order: holds read back come in no particular one.
func (l *Lease) SortHolds() {
	slices.Sort(l.Resources)
	slices.Sort(l.Limits)
}
