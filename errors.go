package baton

import (
	"errors"

	"github.com/batonhq/baton/store"
)

// Errors of the lease contract. They are the store's sentinels, so errors.Is works on errors from
// a Locker and from a store alike.
var (
	// ErrLockHeld: another lease holds the key. errors.As gives a *LockHeldError.
	ErrLockHeld = store.ErrLockHeld
	// ErrNotHeld: the lease is no longer the live lease on its key (expired, taken over,
	// force-released or released).
	ErrNotHeld = store.ErrNotHeld
	// ErrNotFound: no live lease on the key.
	ErrNotFound = store.ErrNotFound
	// ErrResting: the key rests after a release (cooldown) or after an expiry or a
	// force-release (lock-delay). errors.As gives a *RestingError with the reason and the
	// remaining time.
	ErrResting = store.ErrResting
	// ErrInvalidArgument: bad input. errors.As gives an *InvalidArgumentError naming the field.
	ErrInvalidArgument = store.ErrInvalidArgument
	// ErrClosed: the store was closed.
	ErrClosed = store.ErrClosed

	// ErrLeaseLost is the cause reported by Lease.Err when the lease ended without Release:
	// the store said it is no longer held, or no renew succeeded before the local deadline.
	ErrLeaseLost = errors.New("baton: lease lost")
	// ErrReleased is reported by Lease.Err after Release.
	ErrReleased = errors.New("baton: lease released")
)

type (
	// LockHeldError says who holds a key, with which token, until when.
	LockHeldError = store.LockHeldError
	// RestingError says how long a key rests, and why (store.ReasonCooldown or
	// store.ReasonLockDelay).
	RestingError = store.RestingError
	// InvalidArgumentError names the field and the rule it broke.
	InvalidArgumentError = store.InvalidArgumentError
)

// ErrCooldown is the former name of ErrResting, which also covers lock-delay.
//
// Deprecated: use ErrResting.
var ErrCooldown = ErrResting

// CooldownError is the former name of RestingError, which also covers lock-delay.
//
// Deprecated: use RestingError.
type CooldownError = RestingError
