package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// row is a leases row; times are Unix nanoseconds.
type row struct {
	key, leaseID, holder string
	owner                string
	token                int64
	acquiredAt           int64
	expiresAt            int64
	ended                int
	availableAt          int64
	metadata             sql.NullString
}

func (r *row) scan(sc interface{ Scan(...any) error }) error { return sc.Scan(r.fields()...) }

// fields are the scan targets of leaseColumns, then extra.
func (r *row) fields(extra ...any) []any {
	return append([]any{&r.key, &r.leaseID, &r.holder, &r.owner, &r.token, &r.acquiredAt, &r.expiresAt, &r.ended, &r.availableAt, &r.metadata}, extra...)
}

func (r *row) lease(now int64) *store.Lease {
	l := &store.Lease{
		Key: r.key, ID: r.leaseID, Holder: r.holder, Owner: r.owner, Token: uint64(r.token),
		AcquiredAt: time.Unix(0, r.acquiredAt), ExpiresAt: time.Unix(0, r.expiresAt),
		TTLLeft: time.Duration(r.expiresAt - now),
	}
	if r.metadata.Valid {
		l.Metadata = json.RawMessage(r.metadata.String)
	}
	return l
}

func nullable(md json.RawMessage) sql.NullString {
	return sql.NullString{String: string(md), Valid: len(md) > 0}
}

// Acquire is one statement (see statements.go): SQLite runs one writer at a time, so the token
// read from the counter and the grant that uses it are one atomic step, and grant order and
// token order agree. When it grants nothing, the row is read to say why; if that row is free by
// then (another process released it in between), the grant is tried again. A key of a tree has
// a statement of its own (trees_grant.go); a key that this process did not know to be in a tree
// (another process set it) is refused by the flat statement, found free, and tried again there.
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if p.Beyond() {
		return s.acquireBeyond(ctx, p)
	}
	for {
		if s.rated.Of(p.Key) != "" {
			// A key under a rated prefix is granted through holds, which count its rate.
			return s.acquireBeyond(ctx, p)
		}
		if prefix := s.trees.Of(p.Key); prefix != "" {
			l, err, again := s.acquireTree(ctx, p, prefix)
			if again {
				continue
			}
			return l, err
		}
		now := s.now().UnixNano()
		var r row
		var tookOver bool
		err := s.stmts.acquire.QueryRowContext(ctx, p.Key, p.LeaseID, p.Holder, now, int64(p.TTL),
			int64(p.Cooldown), int64(p.LockDelay), nullable(p.Metadata), p.Owner, p.First).Scan(r.fields(&tookOver)...)
		if err == nil {
			l := r.lease(now)
			l.TookOver = tookOver
			return l, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, s.wrap("acquire", err)
		}
		if refusal, err := s.refusal(ctx, p); err != nil || refusal != nil {
			if err == nil && p.Wait {
				// A refusal whose ticket was not written is no place in the line: the caller
				// gets the store's error, and tries again.
				err = s.enqueue(ctx, p)
			}
			if err != nil {
				return nil, err
			}
			return nil, refusal
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Free, yet not granted: perhaps in a tree, or under a rated prefix, another process set.
		if err := s.loadTrees(ctx); err != nil {
			return nil, err
		}
	}
}

// refusal says why an acquire that granted nothing was refused: a lease holds the key or it rests
// (read from its row), a job attempt holds it or it rests after a job, or tickets wait before the
// caller in its line. nil, nil if none of these holds any more (the key came free in between).
func (s *Store) refusal(ctx context.Context, p *store.AcquireParams) (error, error) {
	var r row
	err := r.scan(s.stmts.selectRow.QueryRowContext(ctx, p.Key))
	now := s.now().UnixNano()
	var refusal error
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && r.availableAt <= now:
		// No lease refused the key: a job attempt holds it, or it rests after a job, or its
		// line has tickets ahead, or it came free in between.
		if refusal, err = s.jobRefusal(ctx, p.Key, now); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, s.wrap("acquire", err)
	case r.ended == 0 && r.expiresAt > now:
		refusal = &store.LockHeldError{Key: p.Key, Holder: r.holder, Token: uint64(r.token),
			ExpiresAt: time.Unix(0, r.expiresAt), RetryAfter: time.Duration(r.expiresAt - now)}
	case r.availableAt > now:
		reason := store.ReasonLockDelay
		if r.ended == 1 {
			reason = store.ReasonCooldown
		}
		return &store.RestingError{Key: p.Key, Reason: reason, Remaining: time.Duration(r.availableAt - now)}, nil
	}
	if _, resting := refusal.(*store.RestingError); resting {
		return refusal, nil
	}
	line, err := s.readLine(ctx, p.Key, now, maxLineRead)
	if err != nil {
		return nil, err
	}
	ahead, front := store.Place(line, p.LeaseID, p.First)
	held, _ := refusal.(*store.LockHeldError)
	switch {
	case held != nil:
		held.Ahead = ahead
	case ahead > 0:
		// RetryAfter: when the front ticket expires unless its waiter keeps it; zero for a job.
		e := &store.LockHeldError{Key: p.Key, Holder: front.Holder, Ahead: ahead}
		if !front.ExpiresAt.IsZero() {
			e.RetryAfter = time.Duration(front.ExpiresAt.UnixNano() - now)
		}
		return e, nil
	}
	return refusal, nil
}

// jobRefusal says why the job side of the key refuses a lease at now: a running attempt holds it
// (LockHeldError naming "job:<id>"), or it rests after a job (RestingError, resource cooldown).
// nil if neither.
func (s *Store) jobRefusal(ctx context.Context, key string, now int64) (refusal, err error) {
	return s.jobRefusalIn(ctx, nil, key, now)
}

// jobRefusalIn is jobRefusal read in tx (nil: outside any transaction).
func (s *Store) jobRefusalIn(ctx context.Context, tx *sql.Tx, key string, now int64) (refusal, err error) {
	running, rest := s.stmts.runningJob, s.stmts.resourceRest
	if tx != nil {
		running, rest = tx.StmtContext(ctx, running), tx.StmtContext(ctx, rest)
	}
	var id, token, expires int64
	err = running.QueryRowContext(ctx, key, now).Scan(&id, &token, &expires)
	if err == nil {
		return &store.LockHeldError{Key: key, Holder: store.JobHolder(id), Token: uint64(token),
			ExpiresAt: time.Unix(0, expires), RetryAfter: time.Duration(expires - now)}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, s.wrap("acquire", err)
	}
	var until int64
	err = rest.QueryRowContext(ctx, key, now).Scan(&until)
	if err == nil {
		return &store.RestingError{Key: key, Reason: store.ReasonResourceCooldown, Remaining: time.Duration(until - now)}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, s.wrap("acquire", err)
	}
	return nil, nil
}

// wakeJobs wakes this process's workers of the kind of the key's head job, if one waits to be
// claimed: a lease that ended may have been all that held it back.
func (s *Store) wakeJobs(ctx context.Context, key string) {
	var kind string
	if s.stmts.headKind.QueryRowContext(ctx, key).Scan(&kind) == nil {
		s.hub.Notify(notify.JobKey(kind))
	}
}

// Renew extends a live lease by p.TTL from now. Renewals that arrive while others wait for the
// connection share one transaction (renew_batch.go).
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Holds {
		return s.renewHolds(ctx, p)
	}
	return s.renewOne(ctx, p)
}

// renewOne renews a lease: a plain one in a batch of renewals, or, if that finds none, one made
// of holds (shared, several keys, limits) in a transaction of its own.
func (s *Store) renewOne(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	l, err := s.renewBatched(ctx, p)
	if errors.Is(err, store.ErrNotHeld) {
		return s.renewHolds(ctx, p)
	}
	return l, err
}

// Release ends a live lease of p.Owner and wakes this process's waiters.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if p.Holds {
		if res, err := s.releaseHolds(ctx, p); !errors.Is(err, store.ErrNotHeld) {
			return res, err
		}
	}
	now := s.now().UnixNano()
	res, err := s.stmts.release.ExecContext(ctx, p.Key, p.LeaseID, now, p.Owner)
	if err != nil {
		return nil, s.wrap("release", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, s.wrap("release", err)
	} else if n == 1 {
		s.wakeFront(ctx, p.Key)
		// Best effort: if another process re-granted the key meanwhile, Held stays zero.
		var held int64
		_ = s.stmts.heldFor.QueryRowContext(ctx, p.Key, p.LeaseID, now).Scan(&held)
		return &store.ReleaseResult{Held: time.Duration(held)}, nil
	}
	var released int
	if err := s.stmts.releasedBy.QueryRowContext(ctx, p.Key, p.LeaseID, p.Owner).Scan(&released); err != nil {
		return nil, s.wrap("release", err)
	}
	if released > 0 {
		return &store.ReleaseResult{AlreadyReleased: true}, nil
	}
	// A lease made of holds (shared, several keys, limits) ends here.
	return s.releaseHolds(ctx, p)
}

// ForceRelease ends the live lease on the key, whoever holds it.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var r row
	var now int64
	var woken []string
	err := s.holdTx(ctx, "force-release", func(tx *sql.Tx, at int64) (err error) {
		now = at
		if err := r.scan(tx.StmtContext(ctx, s.stmts.forceRelease).QueryRowContext(ctx, p.Key, now, p.Actor, p.Reason, p.Principal)); err != nil {
			return err
		}
		if r.leaseID == "" {
			// The key's holds: every lease that holds it ends, with all it holds.
			woken, err = s.endHoldsOf(ctx, tx, p.Key, now)
		}
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	s.wakeFront(ctx, p.Key)
	for _, k := range woken {
		if k != p.Key {
			s.wakeFront(ctx, k)
		}
	}
	return r.lease(now), nil
}

// Get returns the live lease on key.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	now := s.now().UnixNano()
	var r row
	err := r.scan(s.stmts.get.QueryRowContext(ctx, key, now))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.wrap("get", err)
	}
	return r.lease(now), nil
}

// List returns live leases in key order, reading only the keys in the prefix's range.
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	now := s.now().UnixNano()
	r := newKeyRange(p.After, p.Prefix)
	rows, err := s.stmts.list[r.shape()].QueryContext(ctx, r.lower, r.bound, p.Holder, now, p.Limit)
	if err != nil {
		return nil, s.wrap("list", err)
	}
	defer rows.Close()
	var out []*store.Lease
	for rows.Next() {
		var r row
		if err := r.scan(rows); err != nil {
			return nil, s.wrap("list", err)
		}
		out = append(out, r.lease(now))
	}
	return out, s.wrap("list", rows.Err())
}

// Events lists the audit log.
func (s *Store) Events(ctx context.Context, p *store.EventsParams) ([]*store.Event, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	stmt := s.stmts.events[p.Shape()]
	rows, err := stmt.QueryContext(ctx, p.IDBound(), p.Key, p.Limit)
	if err != nil {
		return nil, s.wrap("events", err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		var e store.Event
		var id, at, token int64
		if err := rows.Scan(&id, &at, &e.Kind, &e.Key, &e.LeaseID, &e.Holder, &token, &e.Actor, &e.Principal, &e.Reason, &e.JobID, &e.JobKind, &e.Attempt, &e.Outcome, &e.Limit); err != nil {
			return nil, s.wrap("events", err)
		}
		e.ID, e.At, e.Token = uint64(id), time.Unix(0, at), uint64(token)
		out = append(out, &e)
	}
	return out, s.wrap("events", rows.Err())
}
