package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// One resource, one line (store.LineWaiter): a key's waiting lock requests (tickets, see
// migrations/0011_tickets.sql) and its unfinished jobs that are not running wait in one line, by
// arrival. The acquire statement reads the line while it holds the key's row lock, which every
// grant of the key takes (and every claim of a job on a key that was ever locked, for its gate),
// and enqueues or ends the caller's ticket in the same statement.

// meCTE is the acquire statement's first CTE: the caller's ticket, if it has one (live or
// expired), read once. $1 key, $2 lease_id.
func meCTE(schema string) string {
	return `me AS MATERIALIZED (SELECT m.created_at, m.seq, m.expires_at FROM ` + pgx.Identifier{schema, "tickets"}.Sanitize() +
		` m WHERE m.key = $1 AND m.lease_id = $2)`
}

// lineFreeSQL is the acquire statement's line condition: no live ticket arrived before the
// caller (a break-glass ticket is before every other; ties go by enqueue order) and no ready head
// job was submitted before it (none at all for a break-glass request). The caller's arrival is its
// live ticket's (me), or now() if it has none. A head that is not ready (scheduled_at in the
// future: scheduled, or backing off) holds no one up. $1 key, $2 lease_id, $10 first.
func lineFreeSQL(schema string) string {
	tk, jobs := pgx.Identifier{schema, "tickets"}.Sanitize(), pgx.Identifier{schema, "jobs"}.Sanitize()
	my := `coalesce((SELECT me.created_at FROM me WHERE me.expires_at > now()), now())`
	mySeq := `coalesce((SELECT me.seq FROM me WHERE me.expires_at > now()), 9223372036854775807)`
	return `(NOT EXISTS (SELECT 1 FROM ` + tk + ` t WHERE t.key = $1 AND t.lease_id <> $2 AND t.expires_at > now()
		AND ((t.first AND NOT $10::boolean) OR (t.first = $10::boolean AND (t.created_at, t.seq) < (` + my + `, ` + mySeq + `))))
	AND ($10::boolean OR ` + noReadyHeadBefore(jobs, my) + `))`
}

// noReadyHeadBefore: the key's head job, if it is ready (not scheduled for later, not backing
// off), was submitted after arrival. $1 key.
func noReadyHeadBefore(jobs, arrival string) string {
	return `NOT EXISTS (SELECT 1 FROM ` + jobs + ` h WHERE h.resource = $1 AND h.head
		AND h.state IN ('scheduled', 'available', 'retryable') AND h.scheduled_at <= now() AND h.created_at <= ` + arrival + `)`
}

// tryLineFreeSQL is lineFreeSQL for a caller that neither waits nor is break-glass
// (tryAcquire): any live ticket in the key's line refuses it, its own included (see
// acquireQuery). $1 key.
func tryLineFreeSQL(schema string) string {
	tk, jobs := pgx.Identifier{schema, "tickets"}.Sanitize(), pgx.Identifier{schema, "jobs"}.Sanitize()
	return `(NOT EXISTS (SELECT 1 FROM ` + tk + ` t WHERE t.key = $1 AND t.expires_at > now())
	AND ` + noReadyHeadBefore(jobs, `now()`) + `)`
}

// lineQuery reads a key's line in order: break-glass tickets, then tickets and jobs by arrival (a
// job before a ticket of the same instant). Expired tickets are skipped. $1 key, $2 limit.
func lineQuery(schema string) string {
	tk, jobs := pgx.Identifier{schema, "tickets"}.Sanitize(), pgx.Identifier{schema, "jobs"}.Sanitize()
	return `SELECT job, kind, lease_id, holder, owner, created_at, expires_at, not_before, first, reason, mode, lease_key FROM (
	SELECT 0::bigint AS job, '' AS kind, lease_id, holder, owner, created_at, expires_at, NULL::timestamptz AS not_before,
		first, reason, seq, mode, lease_key
	FROM ` + tk + ` WHERE key = $1 AND expires_at > now()
	UNION ALL
	SELECT id, kind, '', 'job:' || id, '', created_at, NULL, CASE WHEN scheduled_at > now() THEN scheduled_at END, false, '', 0,
		CASE WHEN shared THEN 'shared' ELSE 'exclusive' END, ''
	FROM ` + jobs + ` WHERE resource = $1 AND state IN ('scheduled', 'available', 'retryable')
) l ORDER BY first DESC, created_at, job = 0, job, seq LIMIT $2`
}

// maxLineRead bounds the entries of a line read to place a refused caller.
const maxLineRead = 1000

func (s *Store) readLine(ctx context.Context, key string, limit int) ([]*store.Ticket, error) {
	rows, err := s.pool.Query(ctx, s.lineSQL, key, limit)
	if err != nil {
		return nil, s.fail("line", key, err)
	}
	l, err := scanLine(rows)
	if err != nil {
		return nil, s.fail("line", key, err)
	}
	return l, nil
}

// scanLine reads the rows of lineQuery and closes them.
func scanLine(rows pgx.Rows) ([]*store.Ticket, error) {
	defer rows.Close()
	var l []*store.Ticket
	for rows.Next() {
		t := &store.Ticket{Position: len(l) + 1}
		var expires, notBefore *time.Time
		var mode string
		if err := rows.Scan(&t.Job, &t.JobKind, &t.LeaseID, &t.Holder, &t.Owner, &t.Since, &expires, &notBefore,
			&t.First, &t.FirstReason, &mode, &t.LeaseKey); err != nil {
			return nil, err
		}
		t.Shared = mode == "shared"
		if expires != nil {
			t.ExpiresAt = *expires
		}
		if notBefore != nil {
			t.NotBefore = *notBefore
		}
		l = append(l, t)
	}
	return l, rows.Err()
}

// lineRefusal completes a refusal with the caller's place in the key's line: held (a holder
// refused it; nil if the key is free) gets Ahead; a free key is refused naming the first ahead,
// or, if nobody is ahead by now, nil: the caller should try again.
func (s *Store) lineRefusal(ctx context.Context, p *store.AcquireParams, held *store.LockHeldError) error {
	l, err := s.readLine(ctx, p.Key, maxLineRead)
	if err != nil {
		if held != nil {
			return held // the refusal stands; only its place is unknown
		}
		return err
	}
	n, front := store.Place(l, p.LeaseID, p.First)
	if held != nil {
		held.Ahead = n
		return held
	}
	if front == nil { // the line moved on meanwhile: the caller may be next; try again
		return nil
	}
	e := &store.LockHeldError{Key: p.Key, Holder: front.Holder, Ahead: n}
	if !front.ExpiresAt.IsZero() {
		e.RetryAfter = max(time.Until(front.ExpiresAt), 0)
	}
	return e
}

// SubscribeAs is Subscribe for the waiter of ticket leaseID: a key that frees wakes the front of
// its line by name, here and, through NOTIFY, in every process.
func (s *Store) SubscribeAs(key, leaseID string) (<-chan struct{}, func()) {
	return s.closed.Subscribe(func(keys ...string) (<-chan struct{}, func()) {
		return s.hub.SubscribeAs(leaseID, keys...)
	}, key)
}

// LeaveLine removes a waiter's tickets (in every line of its request: a request for several keys
// or limits has a ticket in each, with its first key as lease_key) and, in each line whose key
// is available, wakes the next in line.
func (s *Store) LeaveLine(ctx context.Context, key, leaseID, owner string) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, s.leaveSQL, key, leaseID, owner, s.channel)
	if err != nil {
		return s.fail("leave line", key, err)
	}
	fronts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var front string
		var notified any
		err := r.Scan(&front, &notified)
		return front, err
	})
	if err != nil {
		return s.fail("leave line", key, err)
	}
	for _, f := range fronts {
		notifyFront(s.hub, f)
	}
	return nil
}

// frontPayload names ticket f for a wake-up: the key its waiter subscribed by (its request's
// first key, lease_key, or the ticket's key for a plain request), then \x1e and its lease ID; a
// waiting job's ticket (store.JobLeaseID) names its kind's workers instead (notify.JobKey), read
// from jobs, the sanitized name of the jobs table.
func frontPayload(jobs string) string {
	byKey := `(CASE WHEN f.lease_key <> '' THEN f.lease_key ELSE f.key END) || E'\x1e' || f.lease_id`
	return `CASE WHEN starts_with(f.lease_id, E'\x1fjob:') THEN coalesce((SELECT E'\x1fjob:' || fj.kind FROM ` + jobs + ` fj
	WHERE fj.id = substr(f.lease_id, 6)::bigint), ` + byKey + `) ELSE ` + byKey + ` END`
}

// notifyFront wakes the waiter a frontPayload names, if it waits in this process (a job's
// front: its kind's workers).
func notifyFront(hub *notify.Hub, payload string) bool {
	if strings.HasPrefix(payload, "\x1fjob:") && !strings.Contains(payload, "\x1e") {
		hub.Notify(payload)
		return true
	}
	key, id, ok := strings.Cut(payload, "\x1e")
	return ok && hub.NotifyID(key, id)
}

// leaveQuery deletes a request's tickets and, in each of their lines whose key is available,
// NOTIFYs the new front by name. $1 key, $2 lease_id, $3 owner, $4 channel.
func leaveQuery(schema string) string {
	tk, leases := pgx.Identifier{schema, "tickets"}.Sanitize(), pgx.Identifier{schema, "leases"}.Sanitize()
	frontPayload := frontPayload(pgx.Identifier{schema, "jobs"}.Sanitize())
	return `WITH d AS (
	DELETE FROM ` + tk + ` WHERE lease_id = $2 AND owner = $3 AND (key = $1 OR lease_key = $1) RETURNING key
), front AS (
	SELECT f.payload FROM d CROSS JOIN LATERAL (
		SELECT ` + frontPayload + ` AS payload FROM ` + tk + ` f WHERE f.key = d.key AND f.lease_id <> $2 AND f.expires_at > now()
			AND NOT EXISTS (SELECT FROM ` + leases + ` l WHERE l.key = d.key AND l.available_at > now())
		ORDER BY f.first DESC, f.created_at, f.seq LIMIT 1
	) f
)
SELECT payload, pg_notify($4, payload) FROM front`
}

// resourceLineQuery reads a key's holder and rest in one statement: the live leases row (a lease,
// or a job attempt's gate), else a running attempt on a key never locked; the row's rest and the
// resource's cooldown. $1 key.
func resourceLineQuery(schema string) string {
	leases, jobs := pgx.Identifier{schema, "leases"}.Sanitize(), pgx.Identifier{schema, "jobs"}.Sanitize()
	resources := pgx.Identifier{schema, "resources"}.Sanitize()
	return `SELECT h.lease_id, h.holder, h.owner, h.token, h.acquired_at, h.expires_at, h.job_id,
	(extract(epoch FROM h.expires_at - now()) * 1000000)::bigint,
	r.ended, (extract(epoch FROM r.available_at - now()) * 1000000)::bigint,
	(extract(epoch FROM c.cooldown_until - now()) * 1000000)::bigint
FROM (SELECT 1) one
LEFT JOIN LATERAL (
	SELECT lease_id, holder, owner, token, acquired_at, expires_at, job_id FROM ` + leases + `
	WHERE key = $1 AND ended = 0 AND expires_at > now()
	UNION ALL
	SELECT '', 'job:' || id, owner, token, attempted_at, lease_expires_at, id FROM ` + jobs + `
	WHERE resource = $1 AND state = 'running' AND lease_expires_at > now()
	LIMIT 1
) h ON true
LEFT JOIN ` + leases + ` r ON r.key = $1 AND r.available_at > now() AND NOT (r.ended = 0 AND r.expires_at > now())
LEFT JOIN ` + resources + ` c ON c.key = $1 AND c.cooldown_until > now()`
}

// ResourceLine returns key's holder, rest and line, read in one repeatable-read transaction.
func (s *Store) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	if err := store.ValidateLineRead(key, limit); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	out := &store.ResourceLine{Key: key}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		var (
			leaseID, holder, owner              *string
			token, jobID, ttlUs, restUs, coolUs *int64
			acquired, expires                   *time.Time
			ended                               *int16
		)
		if err := tx.QueryRow(ctx, s.resourceLineSQL, key).Scan(&leaseID, &holder, &owner, &token, &acquired, &expires,
			&jobID, &ttlUs, &ended, &restUs, &coolUs); err != nil {
			return err
		}
		if holder != nil {
			out.Holder = &store.Lease{Key: key, ID: *leaseID, Holder: *holder, Owner: *owner, Token: uint64(*token),
				AcquiredAt: *acquired, ExpiresAt: *expires, TTLLeft: micros(*ttlUs)}
			out.HolderJob = *jobID
			if out.HolderJob != 0 {
				out.Holder.ID = ""
			}
			if *leaseID == "" && out.HolderJob == 0 {
				// Held through holds: every live holder.
				if out.Holders, err = s.keyHolders(ctx, tx, key); err != nil {
					return err
				}
			}
		} else {
			if ended != nil {
				reason := store.ReasonLockDelay
				switch *ended {
				case 1:
					reason = store.ReasonCooldown
				case 3:
					reason = store.ReasonResourceCooldown
				}
				out.Rest = &store.Rest{Key: key, Reason: reason, Remaining: micros(*restUs)}
			}
			if coolUs != nil && (out.Rest == nil || micros(*coolUs) > out.Rest.Remaining) {
				out.Rest = &store.Rest{Key: key, Reason: store.ReasonResourceCooldown, Remaining: micros(*coolUs)}
			}
		}
		rows, err := tx.Query(ctx, s.lineSQL, key, limit)
		if err != nil {
			return err
		}
		if out.Tickets, err = scanLine(rows); err != nil {
			return err
		}
		if err := s.relatedHolders(ctx, tx, out, limit); err != nil {
			return err
		}
		if out.Rates, err = s.lineRates(ctx, tx, key); err != nil {
			return err
		}
		more, err := s.lineScopedRates(ctx, tx, key)
		out.Rates = append(out.Rates, more...)
		return err
	})
	if err != nil {
		return nil, s.fail("resource line", key, err)
	}
	return out, nil
}

// wakeFromPayload hands a NOTIFY payload to the hub: a key (wake one waiter), or a key and the
// lease ID of its front ticket (wake that waiter; if it does not wait in this process, one
// waiter of the key, which may wait without a name: its attempt costs little, a missed wake-up a
// poll interval).
func wakeFromPayload(hub *notify.Hub, payload string) {
	if key, id, ok := strings.Cut(payload, "\x1e"); ok {
		if !hub.NotifyID(key, id) {
			hub.Notify(key)
		}
		return
	}
	hub.Notify(payload)
}

// LastClaim: this process's latest claim of kind, or now if a job of the kind runs (in any
// process), or the latest mark of a waiting worker (a mark lasts 30 s from when it was made).
func (s *Store) LastClaim(ctx context.Context, kind string) (time.Time, error) {
	last := s.claims.Last(kind)
	var running bool
	var markedAgo *int64
	err := s.pool.QueryRow(ctx, s.lastClaimSQL, kind).Scan(&running, &markedAgo)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return last, nil
	case err != nil:
		return time.Time{}, s.fail("last claim", kind, err)
	case running:
		return time.Now(), nil
	case markedAgo != nil:
		if at := time.Now().Add(-micros(*markedAgo)); at.After(last) {
			last = at
		}
	}
	return last, nil
}

// lastClaimQuery: whether a job of kind $1 runs, and how long ago (µs) a waiting worker last
// marked the kind (waiting_until is the mark plus 30 s), if it ever did.
func lastClaimQuery(schema string) string {
	kinds, jobs := pgx.Identifier{schema, "job_kinds"}.Sanitize(), pgx.Identifier{schema, "jobs"}.Sanitize()
	return `SELECT EXISTS (SELECT 1 FROM ` + jobs + ` WHERE state = 'running' AND kind = $1),
	CASE WHEN waiting_until > '-infinity' THEN (extract(epoch FROM now() - (waiting_until - interval '30 seconds')) * 1000000)::bigint END
FROM ` + kinds + ` WHERE name = $1`
}

// keyHolders reads key's live holds, in token order.
func (s *Store) keyHolders(ctx context.Context, tx pgx.Tx, key string) ([]*store.Lease, error) {
	rows, err := tx.Query(ctx, s.hq.keyHolders, key, store.MaxListLimit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Lease
	for rows.Next() {
		l := &store.Lease{Key: key}
		var mode string
		var token, ttlUs int64
		if err := rows.Scan(&l.ID, &mode, &l.Holder, &l.Owner, &token, &l.AcquiredAt, &l.ExpiresAt, &ttlUs); err != nil {
			return nil, err
		}
		l.Shared, l.Token, l.TTLLeft = mode == "shared", uint64(token), micros(ttlUs)
		out = append(out, l)
	}
	return out, rows.Err()
}

// relatedHolders sets ResourceLine.Tree and Related of l.Key, read in tx.
func (s *Store) relatedHolders(ctx context.Context, tx pgx.Tx, l *store.ResourceLine, limit int) error {
	var prefix string
	switch err := tx.QueryRow(ctx, s.tq.probe, l.Key).Scan(&prefix); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	if store.ValidateTreeKey("key", l.Key, prefix) != nil {
		return nil
	}
	l.Tree = prefix
	lo, hi := store.DescendantRange(l.Key)
	rows, err := tx.Query(ctx, s.hq.relatedHolders, store.TreeAncestors(l.Key, prefix), lo, hi, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		h := &store.Lease{}
		var mode string
		var token, ttlUs int64
		if err := rows.Scan(&h.Key, &h.ID, &mode, &h.Holder, &h.Owner, &token, &h.AcquiredAt, &h.ExpiresAt, &ttlUs); err != nil {
			return err
		}
		h.Shared, h.Token, h.TTLLeft = mode == "shared", uint64(token), micros(ttlUs)
		l.Related = append(l.Related, h)
	}
	return rows.Err()
}
