package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// clearCooldownSQL ends resource $1's cooldown in one statement: it locks the resource's row
// (then its head's, the order of submits and promotions), clears the cooldown, makes the head
// claimable now if the cooldown had postponed it, records the clear in the audit log if the
// schema is audited (its audit triggers exist: audit is a property of the schema) and NOTIFYs
// workers of the head's kind that may be waiting. $2 actor, $3 reason, $4 principal.
const clearCooldownSQL = `WITH r0 AS (
	SELECT key, cooldown_until, cooldown_job FROM {resources} WHERE key = $1 AND cooldown_until > now() FOR UPDATE
), u AS (
	UPDATE {resources} r SET cooldown_until = NULL, cooldown_job = 0 FROM r0 WHERE r.key = r0.key
	RETURNING r0.key, r0.cooldown_until, r0.cooldown_job
), h AS (
	UPDATE {jobs} j SET scheduled_at = now(), state = CASE WHEN j.state = 'scheduled' THEN 'available' ELSE j.state END
	FROM u WHERE j.resource = u.key AND j.head AND j.state IN ('scheduled', 'available', 'retryable')
		AND j.scheduled_at = u.cooldown_until
	RETURNING j.kind
), ev AS (
	INSERT INTO {events} (kind, key, lease_id, holder, token, actor, reason, principal)
	SELECT '` + store.EventResourceCooldownCleared + `', u.key, '', '', u.cooldown_job, $2, $3, $4 FROM u
	WHERE EXISTS (SELECT FROM pg_trigger WHERE tgrelid = '{leases}'::regclass AND tgname = 'leases_audit_update')
), gate AS (
	-- The key's leases row rests after the job too (ended 3, see jobs_gate_end): it is freed with
	-- the cooldown, and lock waiters are woken.
	UPDATE {leases} l SET available_at = now() FROM u WHERE l.key = u.key AND l.ended = 3 AND l.job_id = 0
		AND l.available_at > now()
	RETURNING pg_notify({channel}, l.key)::text
), woken AS (
	SELECT pg_notify({channel}, {jobkey} || k.name) FROM {kinds} k
	WHERE k.name = ANY (ARRAY(SELECT kind FROM h)) AND k.waiting_until > now()
)
SELECT u.cooldown_until, u.cooldown_job, (extract(epoch FROM u.cooldown_until - now()) * 1000000)::bigint,
	coalesce((SELECT kind FROM h LIMIT 1), ''), (SELECT count(*) FROM woken)::int + (SELECT count(*) FROM gate)::int
FROM u`

func buildClearCooldownSQL(schema, channel string) string {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// The schema is [a-z0-9_] and the channel derives from it, so neither can hold a quote.
	return strings.NewReplacer("{resources}", id("resources"), "{jobs}", id("jobs"), "{kinds}", id("job_kinds"),
		"{events}", id("events"), "{leases}", id("leases"), "{channel}", "'"+channel+"'",
		"{jobkey}", "E'\\x1fjob:'").Replace(clearCooldownSQL)
}

// ClearResourceCooldown ends a resource's cooldown early (see store.JobStore).
func (s *Store) ClearResourceCooldown(ctx context.Context, p *store.ClearCooldownParams) (*store.ResourceCooldown, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := &store.ResourceCooldown{Resource: p.Resource}
	var leftUs int64
	var kind string
	var woken int
	err := s.pool.QueryRow(ctx, s.clearCooldown, p.Resource, p.Actor, p.Reason, p.Principal).Scan(&out.Until, &out.Job, &leftUs, &kind, &woken)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: resource %q is not cooling down: %w", p.Resource, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.jobErr("clear resource cooldown", err)
	}
	out.Left = time.Duration(leftUs) * time.Microsecond
	if kind != "" {
		s.hub.Notify(notify.JobKey(kind))
	}
	return out, nil
}
