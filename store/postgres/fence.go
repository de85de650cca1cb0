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

// fenceBeginSQL points the transaction's search_path at the store's schema (fence.Check names
// its table without one) and reads the greatest fencing token drawn so far, $2 the token
// sequence. pg_sequence_last_value reads the sequence itself, outside transactions: it counts
// a value as soon as nextval returned it, before the grant that drew it commits, so a holder
// that presents its token right after its grant is never refused. It is NULL until the first
// nextval. It needs only USAGE or SELECT on the sequence, as nextval needs USAGE.
const fenceBeginSQL = `SELECT set_config('search_path', $1, true), coalesce(pg_sequence_last_value($2::regclass), 0)`

// CheckFence implements store.Fencer on the fence table of package fence in the store's schema
// (migration 0004). The sequence never goes back, so a token at most its value when read stays
// issued for the rest of the transaction.
func (s *Store) CheckFence(ctx context.Context, resource string, token uint64) (uint64, error) {
	if err := store.ValidateFence(resource, token); err != nil {
		return 0, err
	}
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: check fence: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var path string
	var issued int64
	err = tx.QueryRow(ctx, fenceBeginSQL, pgx.Identifier{s.schema}.Sanitize(),
		pgx.Identifier{s.schema, "token_seq"}.Sanitize()).Scan(&path, &issued)
	if err != nil {
		return 0, fmt.Errorf("postgres: check fence: %w", err)
	}
	if token > uint64(issued) {
		return 0, store.UnissuedToken(token, uint64(issued))
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

// resetFenceSQL deletes resource $1's fence and, if the schema is audited (its audit triggers
// exist: audit is a property of the schema), records the reset with actor $2, reason $3 and
// principal $4, in
// one statement; it returns the token the fence held, and no row if there was none.
func resetFenceSQL(schema string) string {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// The schema is [a-z0-9_] (Config.Schema's rule), so the quoted names hold no quote to escape.
	return `WITH d AS (
	DELETE FROM ` + id(fence.Table) + ` WHERE resource = $1 RETURNING resource, token
), ev AS (
	INSERT INTO ` + id("events") + ` (kind, key, lease_id, holder, token, actor, reason, principal)
	SELECT '` + store.EventFenceReset + `', d.resource, '', '', d.token, $2, $3, $4 FROM d
	WHERE EXISTS (SELECT FROM pg_trigger WHERE tgrelid = '` + id("leases") + `'::regclass AND tgname = 'leases_audit_update')
)
SELECT token FROM d`
}

// ResetFence implements store.Fencer.
func (s *Store) ResetFence(ctx context.Context, p *store.ResetFenceParams) (uint64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	var token int64
	err := s.pool.QueryRow(ctx, resetFenceSQL(s.schema), p.Resource, p.Actor, p.Reason, p.Principal).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("postgres: resource %q has no fence: %w", p.Resource, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: reset fence: %w", err)
	}
	return uint64(token), nil
}
