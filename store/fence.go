package store

import (
	"context"
	"fmt"
)

// Fencer is a store that keeps fences for resources outside it: per resource, the greatest
// fencing token a holder has presented (`baton fence check`, POST /v1/fences/check). It lets a
// script check its token against the same server that granted it, when the resource itself
// cannot (see package fence for checks inside the resource's own database).
type Fencer interface {
	// CheckFence raises resource's fence to token unless a greater token is stored, atomically,
	// and returns the token stored afterwards: token if the check passed (equal tokens pass),
	// a greater one if token is stale. An empty or over-long resource (MaxKeyLen), or a token of
	// 0 or above 2^63-1, is an *InvalidArgumentError naming the field.
	//
	// A token greater than every token the store has drawn so far for a lease or a job attempt
	// is refused with an *InvalidArgumentError naming "token" (UnissuedToken), and the fence
	// is left as it was: such a token belongs to no holder, and once stored it would refuse
	// every real holder. The comparison is with what has been drawn, committed or not, in the
	// same atomic step as the raise, so a holder that presents its token at once after the
	// grant is never refused.
	CheckFence(ctx context.Context, resource string, token uint64) (stored uint64, err error)

	// ResetFence deletes resource's fence and returns the token it held, so that the next
	// CheckFence accepts any token the store has issued: the way out for a fence raised by a
	// token that no holder should have had. ErrNotFound if the resource has no fence. A store
	// with an audit log records it as EventFenceReset (key: the resource, token: the fence's
	// token before the reset) with p.Actor and p.Reason, in the same atomic step.
	ResetFence(ctx context.Context, p *ResetFenceParams) (token uint64, err error)
}

// ResetFenceParams are the inputs of ResetFence.
type ResetFenceParams struct {
	Resource string
	Reason   string
	Actor    string // who reset it, for the audit log; "unknown" if empty
	// Principal is the authenticated admin, recorded as the event's Principal (see
	// ForceReleaseParams.Principal).
	Principal string
}

// Validate checks the resource with the rules of a key, and the actor and reason of an admin's
// change (defaulting the actor to "unknown").
func (p *ResetFenceParams) Validate() error {
	if err := firstError(validateName("resource", p.Resource, MaxKeyLen), validateFilter("principal", p.Principal, MaxHolderLen)); err != nil {
		return err
	}
	return validateAdminAction(&p.Actor, p.Reason)
}

// MaxFenceToken is the greatest token a fence keeps (they are stored as signed 64-bit integers).
const MaxFenceToken = 1<<63 - 1

// ValidateFence checks the arguments of CheckFence: the resource with the rules of a key, and
// a token from 1 to MaxFenceToken.
func ValidateFence(resource string, token uint64) error {
	if err := validateName("resource", resource, MaxKeyLen); err != nil {
		return err
	}
	if token == 0 || token > MaxFenceToken {
		return invalid("token", "must be between 1 and %d (got %d)", uint64(MaxFenceToken), token)
	}
	return nil
}

// UnissuedToken is the error of CheckFence for a token above issued, the greatest token the
// store has drawn.
func UnissuedToken(token, issued uint64) error {
	return &InvalidArgumentError{Field: "token",
		Rule: fmt.Sprintf("must not exceed the greatest token this store has issued (%d; got %d)", issued, token)}
}
