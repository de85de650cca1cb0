package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/store"
)

var _ store.Fencer = (*Store)(nil)

// CheckFence implements store.Fencer on the fence table of package fence (migration 0003).
func (s *Store) CheckFence(ctx context.Context, resource string, token uint64) (uint64, error) {
	if err := store.ValidateFence(resource, token); err != nil {
		return 0, err
	}
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlite: check fence: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var stale *fence.StaleTokenError
	switch err := fence.Check(ctx, tx, resource, token); {
	case errors.As(err, &stale):
		return stale.Current, nil
	case err != nil:
		return 0, fmt.Errorf("sqlite: check fence: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("sqlite: check fence: %w", err)
	}
	return token, nil
}
