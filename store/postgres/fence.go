package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/store"
)

var _ store.Fencer = (*Store)(nil)

// CheckFence implements store.Fencer on the fence table of package fence in the store's schema
// (migration 0004).
func (s *Store) CheckFence(ctx context.Context, resource string, token uint64) (uint64, error) {
	if err := store.ValidateFence(resource, token); err != nil {
		return 0, err
	}
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: check fence: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// fence.Check names the table without a schema.
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{s.schema}.Sanitize()); err != nil {
		return 0, fmt.Errorf("postgres: check fence: %w", err)
	}
	var stale *fence.StaleTokenError
	switch err := fence.Check(ctx, tx, resource, token); {
	case errors.As(err, &stale):
		return stale.Current, nil
	case err != nil:
		return 0, fmt.Errorf("postgres: check fence: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("postgres: check fence: %w", err)
	}
	return token, nil
}
