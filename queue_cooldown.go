package baton

import (
	"context"

	"github.com/batonhq/baton/store"
)

// ResourceCooldown is a resource's cooldown after a job of a kind with a ResourceCooldown.
type ResourceCooldown = store.ResourceCooldown

// ClearCooldownParams are the inputs of Queue.ClearResourceCooldown.
type ClearCooldownParams = store.ClearCooldownParams

// ClearResourceCooldown ends a resource's cooldown (Kind.ResourceCooldown) early, for an
// operator, and returns what it was; ErrNotFound if the resource is not cooling down. A job that
// the cooldown held back can start at once, and the next submit to the resource is not skipped.
func (q *Queue) ClearResourceCooldown(ctx context.Context, p ClearCooldownParams) (*ResourceCooldown, error) {
	return q.st.ClearResourceCooldown(ctx, &p)
}
