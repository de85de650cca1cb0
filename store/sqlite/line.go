package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// One resource, one line (store.LineWaiter): a key's waiting lock requests (tickets, see
// migrations/0008_tickets.sql) and its unfinished jobs that are not running wait in one line,
// by arrival. SQLite runs one writer at a time, so the statements that grant (acquire) and claim
// read the line in their own write transaction and act on it in the same step.

// myArrival and mySeq are the caller's place: its live ticket's arrival and enqueue order, or now
// and the end if it has none (then every live ticket is ahead). ?1 key, ?2 lease_id, ?4 now.
const (
	myArrival = `coalesce((SELECT created_at FROM tickets WHERE key = ?1 AND lease_id = ?2 AND expires_at > ?4), ?4)`
	mySeq     = `coalesce((SELECT seq FROM tickets WHERE key = ?1 AND lease_id = ?2 AND expires_at > ?4), 9223372036854775807)`
)

// lineFreeSQL is the acquire statement's line condition: the caller renews its own live lease,
// or no live ticket arrived before it (a break-glass ticket is before every other; ties go by
// enqueue order) and no ready head job was submitted before it (none at all for a break-glass
// request). A head that is not ready (scheduled_at in the future: scheduled, or backing off)
// holds no one up. ?1 key, ?2 lease_id, ?3 holder, ?4 now, ?9 owner, ?10 first.
const lineFreeSQL = `(` + ownLeaseSQL + ` OR (` + ownLineFreeSQL + `))`

// ownLeaseSQL: the caller renews its own live lease on key ?1 (see lineFreeSQL).
const ownLeaseSQL = `EXISTS (SELECT 1 FROM leases m WHERE m.key = ?1 AND m.ended = 0 AND m.expires_at > ?4
						AND m.holder = ?3 AND m.owner = ?9 AND m.lease_id <> '')`

// ownLineFreeSQL: nobody waits before the caller in key ?1's own line (see lineFreeSQL).
const ownLineFreeSQL = `NOT EXISTS (SELECT 1 FROM tickets t WHERE t.key = ?1 AND t.lease_id <> ?2 AND t.expires_at > ?4
							AND (t.first > ?10 OR (t.first = ?10 AND (t.created_at < ` + myArrival + `
								OR (t.created_at = ` + myArrival + ` AND t.seq < ` + mySeq + `)))))
						AND (?10 OR NOT EXISTS (SELECT 1 FROM jobs h WHERE h.resource = ?1 AND h.head
							AND h.state IN ` + sqlClaimable + ` AND h.scheduled_at <= ?4 AND h.created_at <= ` + myArrival + `))`

// lineSQL reads a key's line in order: break-glass tickets, then tickets and jobs by arrival (a
// job before a ticket of the same instant). Expired tickets are skipped. ?1 key, ?2 now, ?3 limit.
const lineSQL = `SELECT job, kind, lease_id, holder, owner, created_at, expires_at, not_before, first, reason, mode, lease_key FROM (
		SELECT 0 AS job, '' AS kind, lease_id, holder, owner, created_at, expires_at, 0 AS not_before, first, reason, seq,
			mode, lease_key
		FROM tickets WHERE key = ?1 AND expires_at > ?2
		UNION ALL
		SELECT id, kind, '', 'job:' || id, '', created_at, 0, iif(scheduled_at > ?2, scheduled_at, 0), 0, '', 0,
			iif(beyond IS NOT NULL AND json_extract(beyond, '$.shared'), 'shared', 'exclusive'), ''
		FROM jobs WHERE resource = ?1 AND state IN ` + sqlClaimable + `)
	ORDER BY first DESC, created_at, job = 0, job, seq, lease_id LIMIT ?3`

// enqueueSQL enqueues the ticket of a refused waiter, or keeps its live ticket alive (its place
// kept); a ticket that expired starts again at the back. ?1 key, ?2 lease_id, ?3 holder,
// ?4 owner, ?5 now, ?6 ttl, ?7 first, ?8 reason.
const enqueueSQL = `INSERT INTO tickets (key, lease_id, holder, owner, created_at, expires_at, first, actor, reason, seq)
	VALUES (?1, ?2, ?3, ?4, ?5, ?5 + ?6, ?7, iif(?7, ?3, ''), ?8,
		(SELECT coalesce(max(seq), 0) + 1 FROM tickets WHERE key = ?1))
	ON CONFLICT (key, lease_id) DO UPDATE SET
		created_at = iif(tickets.expires_at > ?5 AND tickets.first >= excluded.first, tickets.created_at, excluded.created_at),
		seq = iif(tickets.expires_at > ?5 AND tickets.first >= excluded.first, tickets.seq, excluded.seq),
		first = excluded.first, actor = excluded.actor, reason = excluded.reason,
		expires_at = excluded.expires_at
	WHERE tickets.owner = excluded.owner`

// maxLineRead bounds the entries of a line read to place a refused caller or wake the front.
const maxLineRead = 1000

// line is a key's line as read at one instant.
type line []*store.Ticket

func (s *Store) readLine(ctx context.Context, key string, now int64, limit int) (line, error) {
	rows, err := s.stmts.line.QueryContext(ctx, key, now, limit)
	if err != nil {
		return nil, s.wrap("line", err)
	}
	l, err := scanLine(rows)
	return l, s.wrap("line", err)
}

// scanLine reads the rows of lineSQL and closes them.
func scanLine(rows *sql.Rows) (line, error) {
	defer rows.Close()
	var l line
	for rows.Next() {
		t := &store.Ticket{Position: len(l) + 1}
		var since, expires, notBefore int64
		var mode string
		if err := rows.Scan(&t.Job, &t.JobKind, &t.LeaseID, &t.Holder, &t.Owner, &since, &expires, &notBefore,
			&t.First, &t.FirstReason, &mode, &t.LeaseKey); err != nil {
			return nil, err
		}
		t.Shared = mode == "shared"
		t.Since = time.Unix(0, since)
		if expires > 0 {
			t.ExpiresAt = time.Unix(0, expires)
		}
		if notBefore > 0 {
			t.NotBefore = time.Unix(0, notBefore)
		}
		l = append(l, t)
	}
	return l, rows.Err()
}

// front is the entry that a free key goes to next: the first ticket or ready job.
func (l line) front() *store.Ticket {
	for _, t := range l {
		if t.Job == 0 || t.NotBefore.IsZero() {
			return t
		}
	}
	return nil
}

// enqueue keeps the ticket of a refused waiter (store.AcquireParams.Wait).
func (s *Store) enqueue(ctx context.Context, p *store.AcquireParams) error {
	_, err := s.stmts.enqueue.ExecContext(ctx, p.Key, p.LeaseID, p.Holder, p.Owner, s.now().UnixNano(), int64(p.TTL),
		p.First, p.FirstReason)
	return s.wrap("acquire", err)
}

// SubscribeAs is Subscribe for the waiter of ticket leaseID: a key that frees wakes the front of
// its line by name.
func (s *Store) SubscribeAs(key, leaseID string) (<-chan struct{}, func()) {
	return s.hub.SubscribeAs(leaseID, key)
}

// LeaveLine removes a waiter's ticket and wakes the next in line.
func (s *Store) LeaveLine(ctx context.Context, key, leaseID, owner string) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	rows, err := s.stmts.leave.QueryContext(ctx, key, leaseID, owner)
	if err != nil {
		return s.wrap("leave line", err)
	}
	var left []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return s.wrap("leave line", err)
		}
		left = append(left, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.wrap("leave line", err)
	}
	for _, k := range left {
		s.wakeFront(ctx, k)
	}
	return nil
}

// wakeFront wakes whoever is at the front of key's line, which may go now: the waiter of the
// front ticket (or, if it waits in no hub of this process, one waiter of the key), or the workers
// of the front job's kind. With nobody in line, one waiter of the key, if any. A shared front
// goes together with the shared tickets right behind it: they are woken too. A request for
// several keys or limits waits (SubscribeAs) under its first key, its ticket's LeaseKey. A key
// of a tree wakes the waiting fronts of its related keys' lines too (wakeRelated).
func (s *Store) wakeFront(ctx context.Context, key string) {
	s.wakeLine(ctx, key)
	if prefix := s.trees.Of(key); prefix != "" {
		s.wakeRelated(ctx, key, prefix)
	}
}

// wakeLine wakes the front of key's own line (see wakeFront).
func (s *Store) wakeLine(ctx context.Context, key string) {
	l, err := s.readLine(ctx, key, s.now().UnixNano(), 16)
	front := l.front()
	switch {
	case err != nil:
		s.hub.Notify(key)
		s.wakeJobs(ctx, key)
	case front == nil:
		s.hub.Notify(key)
	case front.Job != 0:
		s.hub.Notify(notify.JobKey(front.JobKind))
	case s.wakeJobTicket(ctx, front):
	case !s.notifyTicket(key, front):
		s.hub.Notify(key)
	case front.Shared:
		for _, t := range l[front.Position:] {
			if t.Job != 0 || !t.Shared {
				break
			}
			s.notifyTicket(key, t)
		}
	}
}

// wakeJobTicket wakes the workers of the kind of the job whose attempt waits with ticket t, if
// it is a job's (store.JobLeaseID).
func (s *Store) wakeJobTicket(ctx context.Context, t *store.Ticket) bool {
	id, ok := store.JobOfLeaseID(t.LeaseID)
	if !ok {
		return false
	}
	var kind string
	if s.db.QueryRowContext(ctx, `SELECT kind FROM jobs WHERE id = ?`, id).Scan(&kind) == nil {
		s.hub.Notify(notify.JobKey(kind))
	}
	return true
}

// notifyTicket wakes the waiter of ticket t of key's line, under the key it subscribed with.
func (s *Store) notifyTicket(key string, t *store.Ticket) bool {
	if t.LeaseKey != "" {
		key = t.LeaseKey
	}
	return s.hub.NotifyID(key, t.LeaseID)
}

// ResourceLine returns key's holder, rest and line, read in one transaction.
func (s *Store) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	if err := store.ValidateLineRead(key, limit); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("resource line", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := s.now().UnixNano()
	out := &store.ResourceLine{Key: key}
	var r row
	switch err := r.scan(tx.StmtContext(ctx, s.stmts.selectRow).QueryRowContext(ctx, key)); {
	case err == nil && r.ended == 0 && r.expiresAt > now:
		out.Holder = r.lease(now)
		if r.leaseID == "" {
			if out.Holders, err = s.keyHolders(ctx, tx, key, now); err != nil {
				return nil, s.wrap("resource line", err)
			}
		}
	case err == nil && r.availableAt > now:
		reason := store.ReasonLockDelay
		if r.ended == 1 {
			reason = store.ReasonCooldown
		}
		out.Rest = &store.Rest{Key: key, Reason: reason, Remaining: time.Duration(r.availableAt - now)}
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return nil, s.wrap("resource line", err)
	}
	if out.Holder == nil {
		var id, token, expires, attempted int64
		err := tx.QueryRowContext(ctx, `SELECT id, token, lease_expires_at, coalesce(attempted_at, 0) FROM jobs
			WHERE resource = ?1 AND state = 'running' AND lease_expires_at > ?2`, key, now).
			Scan(&id, &token, &expires, &attempted)
		switch {
		case err == nil:
			out.HolderJob = id
			out.Holder = &store.Lease{Key: key, Holder: store.JobHolder(id), Token: uint64(token),
				AcquiredAt: time.Unix(0, attempted), ExpiresAt: time.Unix(0, expires), TTLLeft: time.Duration(expires - now)}
			out.Rest = nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, s.wrap("resource line", err)
		}
	}
	if out.Holder == nil {
		var until int64
		err := tx.StmtContext(ctx, s.stmts.resourceRest).QueryRowContext(ctx, key, now).Scan(&until)
		switch {
		case err == nil && (out.Rest == nil || time.Duration(until-now) > out.Rest.Remaining):
			out.Rest = &store.Rest{Key: key, Reason: store.ReasonResourceCooldown, Remaining: time.Duration(until - now)}
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return nil, s.wrap("resource line", err)
		}
	}
	rows, err := tx.StmtContext(ctx, s.stmts.line).QueryContext(ctx, key, now, limit)
	if err != nil {
		return nil, s.wrap("resource line", err)
	}
	out.Tickets, err = scanLine(rows)
	if err != nil {
		return nil, s.wrap("resource line", err)
	}
	if err := s.relatedHolders(ctx, tx, out, now, limit); err != nil {
		return nil, s.wrap("resource line", err)
	}
	if out.Rates, err = lineRates(ctx, tx, key, time.Unix(0, now)); err != nil {
		return nil, s.wrap("resource line", err)
	}
	more, err := lineScopedRates(ctx, tx, key, time.Unix(0, now))
	if err != nil {
		return nil, s.wrap("resource line", err)
	}
	out.Rates = append(out.Rates, more...)
	return out, nil
}

// LastClaim: this process's latest claim of kind, or now if a job of the kind runs. Workers of
// other processes on the same file are seen only while they run a job.
func (s *Store) LastClaim(ctx context.Context, kind string) (time.Time, error) {
	var running bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND kind = ?1)`, kind).Scan(&running)
	if err != nil {
		return time.Time{}, s.wrap("last claim", err)
	}
	if running {
		return time.Now(), nil
	}
	return s.claims.Last(kind), nil
}
