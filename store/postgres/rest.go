package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// clearRestQuery ends the rest of a key that no live lease holds, in one statement: it locks the
// row, moves available_at to now, records the clear_rest event if the schema is audited (the
// audit triggers exist: audit is a property of the schema) and wakes waiters. It returns the
// ended column (1: a cooldown after a release) and what was left of the rest in µs. The schema
// name is [a-z0-9_], so the quoted identifiers cannot contain a single quote.
// $1 key, $2 channel, $3 actor, $4 reason, $5 principal.
func clearRestQuery(schema string) string {
	t := pgx.Identifier{schema, "leases"}.Sanitize()
	return `WITH old AS (
	SELECT key, lease_id, holder, token, ended, available_at, waiters FROM ` + t + `
	WHERE key = $1 AND available_at > now() AND NOT (` + live + `) AND ended <> 3
	FOR UPDATE
), u AS (
	UPDATE ` + t + ` l SET available_at = now(), end_actor = $3, end_reason = $4, end_principal = $5
	FROM old WHERE l.key = old.key
	RETURNING old.*
), ev AS (
	INSERT INTO ` + pgx.Identifier{schema, "events"}.Sanitize() + ` (kind, key, lease_id, holder, token, actor, reason, principal)
	SELECT '` + store.EventClearRest + `', key, lease_id, holder, token, $3, $4, $5 FROM u
	WHERE EXISTS (SELECT FROM pg_trigger WHERE tgrelid = '` + t + `'::regclass AND tgname = 'leases_audit_update')
)
SELECT ended, (extract(epoch FROM available_at - now()) * 1000000)::bigint,
	CASE WHEN waiters THEN pg_notify($2, key)::text END IS NULL FROM u`
}

// ClearRest ends the cooldown or lock-delay of a key that no live lease holds.
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var (
		ended    int
		leftUs   int64
		notified bool
	)
	err := s.pool.QueryRow(ctx, s.clearRest, p.Key, s.channel, p.Actor, p.Reason, p.Principal).Scan(&ended, &leftUs, &notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.fail("clear-rest", p.Key, err)
	}
	s.hub.Notify(p.Key)
	reason := store.ReasonLockDelay
	if ended == 1 {
		reason = store.ReasonCooldown
	}
	return &store.Rest{Key: p.Key, Reason: reason, Remaining: micros(leftUs)}, nil
}
