package store

import "fmt"

// ResetFenceParams are the inputs of Fencer.ResetFence (optional.go).
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
