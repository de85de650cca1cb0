package baton

import (
	"context"

	"github.com/batonhq/baton/store"
)

// Rest is a cooldown or lock-delay that ClearRest ended early.
type Rest = store.Rest

// ClearRest ends the cooldown (after a release) or lock-delay (after an expiry or a
// force-release) of key, for an operator, so that the next acquire is granted at once. It
// returns what was left of it, or ErrNotFound if key is not resting (free, or held: ForceRelease
// that lease first). Stores with an audit log record it (store.EventClearRest).
func (l *Locker) ClearRest(ctx context.Context, key, reason string) (*Rest, error) {
	return l.store.ClearRest(ctx, &store.ClearRestParams{Key: key, Reason: reason})
}
