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
	// ErrCooldown: the key rests after a release (cooldown) or an expiry (lock-delay).
	// errors.As gives a *CooldownError with the remaining time.
	ErrCooldown = store.ErrCooldown
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
	// CooldownError says how long a key rests, and why.
	CooldownError = store.CooldownError
	// InvalidArgumentError names the field and the rule it broke.
	InvalidArgumentError = store.InvalidArgumentError
)
