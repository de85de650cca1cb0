package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// queries holds the statements of one schema, built once at open. Only the schema-qualified names
// (validated and sanitized) are spliced in; every user value is a bind parameter.
type queries struct {
	acquire, tryAcquire, renew, renewMany, release, released, forceRelease, get, list string
	events                                                                            [4]string // by EventsParams.Shape
	// listBounded is list with the upper end of the prefix's range ($5, store.PrefixEnd).
	listBounded string
}

// leaseCols is what every lease-returning statement yields, in scanLease's order. The remaining
// TTL is computed by the database in microseconds so the caller never compares clocks.
const leaseCols = `key, lease_id, holder, owner, token, acquired_at, expires_at,
	(extract(epoch FROM expires_at - now()) * 1000000)::bigint, metadata`

// live is the predicate of a lease that holds its key.
const live = `ended = 0 AND expires_at > now()`

func buildQueries(schema string) queries {
	t := pgx.Identifier{schema, "leases"}.Sanitize()
	tk := pgx.Identifier{schema, "tickets"}.Sanitize()
	return queries{
		acquire:    acquireQuery(schema, true),
		tryAcquire: acquireQuery(schema, false),

		// $1 key, $2 lease_id, $3 ttl ms, $4 owner.
		renewMany: renewManyQuery(schema),
		renew: `UPDATE ` + t + ` SET
	expires_at   = now() + $3::bigint * interval '1 millisecond',
	available_at = now() + ($3::bigint + lock_delay_ms) * interval '1 millisecond'
WHERE key = $1 AND lease_id = $2 AND owner = $4 AND ` + live + `
RETURNING ` + leaseCols,

		// The NOTIFY is part of the releasing transaction: it is delivered iff the release
		// commits, and sent only if the lease has waiters (the line's front is looked up only
		// then, and woken by name). The resource's head job, if it
		// waits to be claimed, may have been held back by the lease: its kind's workers are
		// woken too if any wait (one probe of the one-head-per-resource index). Exec reports one row per release.
		// $1 key, $2 lease_id, $3 channel, $4 owner.
		release: `WITH u AS (
	UPDATE ` + t + ` SET ended = 1, available_at = now() + cooldown_ms * interval '1 millisecond'
	WHERE key = $1 AND lease_id = $2 AND owner = $4 AND ` + live + `
	RETURNING key, waiters, (extract(epoch FROM now() - acquired_at) * 1000000)::bigint AS held_us
)
SELECT held_us, CASE WHEN front IS NOT NULL THEN pg_notify($3, front)::text
		WHEN waiters THEN pg_notify($3, key)::text END,
	front, (SELECT count(*) FROM (
	SELECT pg_notify($3, E'\x1fjob:' || k.name) FROM ` + pgx.Identifier{schema, "jobs"}.Sanitize() + ` h
	JOIN ` + pgx.Identifier{schema, "job_kinds"}.Sanitize() + ` k ON k.name = h.kind
	WHERE h.resource = x.key AND h.head AND h.state IN ('scheduled', 'available', 'retryable') AND k.waiting_until > now()
) n)::int FROM (
	-- The front is read only if the lease has waiters (CASE is lazy); OFFSET 0 keeps the
	-- subquery whole, so it is read once. It is named by the key its waiter subscribed by (the
	-- first key of its request: lease_key, for a request of several keys or limits) and its ID.
	SELECT u.*, CASE WHEN u.waiters THEN (SELECT ` + frontPayload(pgx.Identifier{schema, "jobs"}.Sanitize()) + ` FROM ` + tk + ` f WHERE f.key = u.key AND f.expires_at > now()
		ORDER BY f.first DESC, f.created_at, f.seq LIMIT 1) END AS front
	FROM u OFFSET 0
) x`,

		// Only the owner learns that its lease was released already. $1 key, $2 lease_id, $3 owner.
		released: `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE key = $1 AND lease_id = $2 AND owner = $3 AND ended = 1)`,

		// The CTE locks the live row and keeps its values as they were, so the caller gets the
		// lease that was ended, with its original expiry. $1 key, $2 channel, $3 actor, $4 reason,
		// $5 principal.
		forceRelease: `WITH old AS (
	SELECT key, lease_id, holder, owner, token, acquired_at, expires_at, metadata, waiters
	FROM ` + t + ` WHERE key = $1 AND ` + live + ` AND job_id = 0
	FOR UPDATE
), u AS (
	UPDATE ` + t + ` l SET ended = 2, end_actor = $3, end_reason = $4, end_principal = $5,
		expires_at = least(l.expires_at, now()),
		available_at = now() + l.lock_delay_ms * interval '1 millisecond'
	FROM old WHERE l.key = old.key
	RETURNING old.*
)
SELECT ` + leaseCols + `, CASE WHEN waiters THEN pg_notify($2, key)::text END IS NULL FROM u`,

		// A job attempt's gate (job_id <> 0, see claimSQL) is not a lease.
		get: `SELECT ` + leaseCols + ` FROM ` + t + ` WHERE key = $1 AND ` + live + ` AND job_id = 0`,

		events: [4]string{eventsSQL(schema, 0), eventsSQL(schema, 1), eventsSQL(schema, 2), eventsSQL(schema, 3)},

		// key >= $2 and, in listBounded, key < $5 (the end of the prefix's range) bound the index
		// scan to the prefix ("C" collation, byte order): without the upper bound a page with
		// fewer matches than its limit reads every key after the prefix. starts_with is the
		// exact test, with no LIKE wildcards to escape. The btree uses the greater of the two
		// lower bounds. $1 after, $2 prefix, $3 holder or '', $4 limit, $5 end.
		list:        listSQL(t, ""),
		listBounded: listSQL(t, " AND key < $5"),
	}
}

// eventsSQL is Events' query for one shape. A key filter is its own query, not
// "key = $2 unless $2 is empty": a generic plan cannot use events_by_key (key, id) for a condition that
// may match every key, and scans the whole log for a rare key's page. $1 the id cursor, $2 key
// or, without a filter, $2 the limit; $3 the limit with a filter.
func eventsSQL(schema string, shape int) string {
	cmp, order, limit := "id > $1", "id", "$2"
	if shape&1 != 0 {
		cmp, order = "id < $1", "id DESC"
	}
	if shape&2 != 0 {
		cmp, limit = cmp+" AND key = $2", "$3"
	}
	return `SELECT id, at, kind, key, lease_id, holder, token, actor, principal, reason, job_id, job_kind, attempt, outcome, limit_name FROM ` + pgx.Identifier{schema, "events"}.Sanitize() + `
WHERE ` + cmp + ` ORDER BY ` + order + ` LIMIT ` + limit
}

func listSQL(table, upper string) string {
	return `SELECT ` + leaseCols + ` FROM ` + table + `
WHERE ` + live + ` AND job_id = 0 AND key > $1 AND key >= $2` + upper + ` AND starts_with(key, $2) AND ($3 = '' OR holder = $3)
ORDER BY key
LIMIT $4`
}

// acquireAttempts bounds the statements one Acquire runs. A refusal is retried only when the
// refusing row came free while the statement waited for it, or was inserted after the statement
// began: both mean another session changed the key meanwhile.
const acquireAttempts = 5

// Acquire grants p.Key to p.LeaseID or renews p.Holder's live lease on it; see the acquire query
// for how the fencing token is assigned and how a refusal is explained.
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var md any // NULL for no metadata
	if len(p.Metadata) > 0 {
		md = string(p.Metadata)
	}
	if prefix, rated := s.trees.Of(p.Key), s.rated.Of(p.Key) != ""; p.Beyond() || prefix != "" || rated {
		// A key of a tree is granted through holds, by the tree's rules (trees.go); an
		// exclusive request for one in one round trip (trees_one.go), unless that hands it back.
		// So is a key under a rated prefix, whose rate the way of holds counts (rates_scoped.go).
		if !p.Beyond() && !p.First && !rated {
			l, how, err := s.acquireTreeOne(ctx, p, prefix, md)
			if how != treeOneHandBack && (how != treeOneRefused || !p.Wait || !isRefusal(err)) {
				return l, err
			}
		}
		return s.acquireBeyond(ctx, p)
	}
	var lastHolder *store.Lease
	marked := false
	// A caller that does not wait runs the statement that writes no ticket, unless it has one.
	try := !p.Wait && !p.First
	stmt := s.q.acquire
	if try {
		stmt = s.q.tryAcquire
	}
	for range acquireAttempts {
		var (
			granted, isLive, freed, tookOver, blocked, inTree bool
			ended                                             int16
			untilAvailable                                    int64
		)
		args := []any{p.Key, p.LeaseID, p.Holder, p.TTL.Milliseconds(), md, p.Cooldown.Milliseconds(),
			p.LockDelay.Milliseconds(), p.Wait, p.Owner, p.First, p.FirstReason}
		if try {
			args = args[:9] // first and its reason are the waiting statement's
		}
		l, err := scanLease(s.grantRow(ctx, p.Key, stmt, args...),
			[]any{&granted}, &ended, &untilAvailable, &isLive, &freed, &tookOver, &blocked, &inTree)
		if errors.Is(err, pgx.ErrNoRows) {
			// The row appeared after the statement's snapshot, or the key, which has no row yet,
			// is in a tree (the statement inserts none).
			prefix, terr := s.treeOf(ctx, p.Key)
			if terr != nil {
				return nil, s.fail("acquire", p.Key, terr)
			}
			inTree = prefix != ""
			if !inTree {
				if inTree, terr = s.underRatedPrefix(ctx, p.Key); terr != nil {
					return nil, s.fail("acquire", p.Key, terr)
				}
			}
		}
		if inTree {
			// A tree (or a rated prefix) this process did not know of yet: the statement granted
			// nothing.
			if err := s.loadTrees(ctx); err != nil {
				return nil, s.fail("acquire", p.Key, err)
			}
			return s.acquireBeyond(ctx, p)
		}
		switch {
		case err == nil && !granted && blocked && try:
			// Free, but a ticket is in the line, perhaps the caller's own from an earlier waiting
			// attempt under this lease ID: the waiting statement places the caller by it, and
			// ends it on a grant.
			try, stmt = false, s.q.acquire
			continue
		case errors.Is(err, pgx.ErrNoRows):
			continue // the row appeared after the statement's snapshot
		case isFirstGrantOfResource(err) && !marked:
			// The key is a resource that was never locked: make it a lock key, then grant.
			if err := s.markLockKey(ctx, p.Key); err != nil {
				return nil, s.fail("acquire", p.Key, err)
			}
			marked = true
			continue
		case errors.As(err, new(*store.RestingError)):
			return nil, err // a failover quarantine (grantRow)
		case err != nil:
			var pgErr *pgconn.PgError
			// Class 22 is a data exception: valid JSON that jsonb cannot hold (\u0000, numbers
			// beyond numeric's range). The statement failed, so nothing was written.
			if md != nil && errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22" {
				return nil, &store.InvalidArgumentError{Field: "metadata",
					Rule: "must be storable as PostgreSQL jsonb (" + pgErr.Message + ")"}
			}
			return nil, s.fail("acquire", p.Key, err)
		case granted:
			l.TookOver = tookOver
			return l, nil
		case blocked:
			// Free, but others wait before the caller in the key's line.
			if err := s.lineRefusal(ctx, p, nil); err != nil {
				return nil, err
			}
			continue
		case freed || isLive && l.ID != "" && l.Holder == p.Holder && l.Owner == p.Owner:
			// Available by the clock once the statement had the row (it came free while the
			// statement waited), or, which the statement rules out, ours: try again.
			lastHolder = l
			continue
		case isLive:
			return nil, s.lineRefusal(ctx, p, &store.LockHeldError{Key: p.Key, Holder: l.Holder, Token: l.Token,
				ExpiresAt: l.ExpiresAt, RetryAfter: l.TTLLeft})
		case ended == 1:
			return nil, &store.RestingError{Key: p.Key, Reason: store.ReasonCooldown, Remaining: micros(untilAvailable)}
		case ended == 3:
			return nil, &store.RestingError{Key: p.Key, Reason: store.ReasonResourceCooldown, Remaining: micros(untilAvailable)}
		default: // expired or force-released
			return nil, &store.RestingError{Key: p.Key, Reason: store.ReasonLockDelay, Remaining: micros(untilAvailable)}
		}
	}
	if lastHolder != nil {
		// Every attempt lost a race for a key that kept changing hands. The last refusing row
		// names a holder that had the key during this call; it is free now, hence RetryAfter 0.
		return nil, &store.LockHeldError{Key: p.Key, Holder: lastHolder.Holder, Token: lastHolder.Token,
			ExpiresAt: lastHolder.ExpiresAt, RetryAfter: 0}
	}
	return nil, fmt.Errorf("postgres: acquire %q: the key's row kept changing; retry", p.Key)
}

// Renew extends the live lease (p.Key, p.LeaseID) of p.Owner to now() + p.TTL; its lock delay is
// kept.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if p.Holds {
		return s.renewHolds(ctx, p)
	}
	if s.trees.Of(p.Key) != "" {
		// A lease on a key of a tree is made of holds (trees.go), unless it was granted before
		// the tree was set.
		if l, err := s.renewHolds(ctx, p); !errors.Is(err, store.ErrNotHeld) {
			return l, err
		}
	}
	l, err := s.renews.Do(ctx, p)
	if errors.Is(err, store.ErrNotHeld) {
		// A lease made of holds (shared, several keys, limits) is renewed through them.
		return s.renewHolds(ctx, p)
	}
	return l, err
}

// renewOne renews one lease with the single-row statement.
func (s *Store) renewOne(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	l, err := scanLease(s.pool.QueryRow(ctx, s.q.renew, p.Key, p.LeaseID, p.TTL.Milliseconds(), p.Owner), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotHeld
	}
	if err != nil {
		return nil, s.fail("renew", p.Key, err)
	}
	return l, nil
}

// Release ends the live lease (p.Key, p.LeaseID) of p.Owner; the key then rests for the lease's
// cooldown.
//
// AlreadyReleased can only be told while the released lease is still the key's latest: once
// another lease has taken the key, the earlier ID is unknown and the answer is ErrNotHeld.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if p.Holds || s.trees.Of(p.Key) != "" {
		if res, err := s.releaseHolds(ctx, p); !errors.Is(err, store.ErrNotHeld) {
			return res, err
		}
	}
	var heldUs int64
	var notified, front *string
	var jobsWoken int
	err := s.pool.QueryRow(ctx, s.q.release, p.Key, p.LeaseID, s.channel, p.Owner).Scan(&heldUs, &notified, &front, &jobsWoken)
	if err == nil {
		if front == nil || !notifyFront(s.hub, *front) {
			s.hub.Notify(p.Key)
		}
		return &store.ReleaseResult{Held: micros(heldUs)}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, s.fail("release", p.Key, err)
	}
	var already bool
	if err := s.pool.QueryRow(ctx, s.q.released, p.Key, p.LeaseID, p.Owner).Scan(&already); err != nil {
		return nil, s.fail("release", p.Key, err)
	}
	if already {
		return &store.ReleaseResult{AlreadyReleased: true}, nil
	}
	// A lease made of holds (shared, several keys, limits) ends here.
	return s.releaseHolds(ctx, p)
}

// Get returns the live lease on key.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	l, err := scanLease(s.pool.QueryRow(ctx, s.q.get, key), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return l, nil
}

// List returns live leases in byte order of their keys.
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var rows pgx.Rows
	var err error
	if end, ok := store.PrefixEnd(p.Prefix); ok {
		rows, err = s.pool.Query(ctx, s.q.listBounded, p.After, p.Prefix, p.Holder, p.Limit, end)
	} else {
		rows, err = s.pool.Query(ctx, s.q.list, p.After, p.Prefix, p.Holder, p.Limit)
	}
	if err != nil {
		return nil, s.fail("list", p.Prefix, err)
	}
	leases, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Lease, error) { return scanLease(r, nil) })
	if err != nil {
		return nil, s.fail("list", p.Prefix, err)
	}
	return leases, nil
}

// ForceRelease ends the live lease on p.Key whoever holds it and returns it as it was. The key then
// rests for that lease's lock delay. p.Reason is validated; recording it is the audit log's job.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var l *store.Lease
	var woken []string
	err := s.holdTx(ctx, func(tx pgx.Tx) (err error) {
		var notified bool // pg_notify returns void; scanned only to keep the call in the select list
		l, err = scanLease(tx.QueryRow(ctx, s.q.forceRelease, p.Key, s.channel, p.Actor, p.Reason, p.Principal), nil, &notified)
		if err != nil || l.ID != "" {
			woken = nil
			return err
		}
		// The key's summary of holds: every lease that holds it ends, with all it holds, and
		// the fronts of their lines are woken.
		woken, err = s.endHoldsOf(ctx, tx, p.Key)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.fail("force-release", p.Key, err)
	}
	s.hub.Notify(p.Key)
	s.wakePayloads(woken)
	return l, nil
}

// scanLease reads the columns in lead (if any), then leaseCols, then the columns in extra.
func scanLease(row pgx.Row, lead []any, extra ...any) (*store.Lease, error) {
	var (
		l     store.Lease
		token int64
		ttlUs int64
		md    []byte
	)
	dest := make([]any, 0, len(lead)+9+len(extra))
	dest = append(dest, lead...)
	dest = append(dest, &l.Key, &l.ID, &l.Holder, &l.Owner, &token, &l.AcquiredAt, &l.ExpiresAt, &ttlUs, &md)
	dest = append(dest, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	l.Token = uint64(token)
	l.TTLLeft = micros(ttlUs)
	if len(md) > 0 {
		l.Metadata = json.RawMessage(md)
	}
	return &l, nil
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// Events lists the audit log.
func (s *Store) Events(ctx context.Context, p *store.EventsParams) ([]*store.Event, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	args := []any{p.IDBound(), p.Key, p.Limit}
	if p.Key == "" {
		args = []any{p.IDBound(), p.Limit} // PostgreSQL refuses a parameter the query does not use
	}
	rows, err := s.pool.Query(ctx, s.q.events[p.Shape()], args...)
	if err != nil {
		return nil, s.fail("events", p.Key, err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		var e store.Event
		var id, token int64
		if err := rows.Scan(&id, &e.At, &e.Kind, &e.Key, &e.LeaseID, &e.Holder, &token, &e.Actor, &e.Principal, &e.Reason, &e.JobID, &e.JobKind, &e.Attempt, &e.Outcome, &e.Limit); err != nil {
			return nil, s.fail("events", p.Key, err)
		}
		e.ID, e.Token = uint64(id), uint64(token)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("events", p.Key, err)
	}
	return out, nil
}
