package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/store"
)

var _ store.Fencer = (*Store)(nil)

// CheckFence implements store.Fencer on the fence table of package fence (migration 0003). The
// transaction is immediate (see DSN): it holds the database's write lock from its start, so
// the token counter it reads is the one every grant has advanced, and no grant can come between
// the read and the raise.
func (s *Store) CheckFence(ctx context.Context, resource string, token uint64) (uint64, error) {
	if err := store.ValidateFence(resource, token); err != nil {
		return 0, err
	}
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlite: check fence: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var issued int64
	if err := tx.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'token'`).Scan(&issued); err != nil {
		return 0, fmt.Errorf("sqlite: check fence: read the token counter: %w", err)
	}
	if token > uint64(issued) {
		return 0, store.UnissuedToken(token, uint64(issued))
	}
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

// ResetFence implements store.Fencer: the fence row is deleted, and the reset recorded in the
// events table if the file is audited, in one write transaction.
func (s *Store) ResetFence(ctx context.Context, p *store.ResetFenceParams) (uint64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlite: reset fence: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var token int64
	err = tx.QueryRowContext(ctx, `DELETE FROM baton_fences WHERE resource = ? RETURNING token`, p.Resource).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sqlite: resource %q has no fence: %w", p.Resource, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: reset fence: %w", err)
	}
	// Audit is a property of the file: its triggers exist (see audit.sql).
	_, err = tx.ExecContext(ctx, `INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal)
		SELECT ?, ?, ?, '', '', ?, ?, ?, ?
		WHERE EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'leases_audit_end')`,
		s.now().UnixNano(), store.EventFenceReset, p.Resource, token, p.Actor, p.Reason, p.Principal)
	if err != nil {
		return 0, fmt.Errorf("sqlite: reset fence: audit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("sqlite: reset fence: %w", err)
	}
	return uint64(token), nil
}
