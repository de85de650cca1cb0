package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/batonhq/baton/store"
)

// Grants in trees (store/trees.go). An exclusive request for one tree key is one statement, as
// a flat key's is (treeAcquireSQL); a shared one, or one for several keys or limits, goes through
// the holds' transaction (holds.go), whose keyRefusal adds the same checks (relatedRefusal). A
// job in a tree is granted as the latter.
//
// The checks, besides the key's own: no ancestor (point lookups by key) and no descendant (one
// range of leases_tree_live) is held in a conflicting mode or rests in its lock-delay; no live
// ticket and no ready head job of an ancestor or a descendant that arrived before the caller
// conflicts with it.

// relatedTicketBeforeSQL: ticket t of a related line is before the caller (?1 key, ?2 lease_id,
// ?4 now, ?10 first): a break-glass ticket before one without, else an earlier arrival, then the
// enqueue order, then the lease ID.
const relatedTicketBeforeSQL = `t.lease_id <> ?2 AND t.expires_at > ?4
	AND (t.first > ?10 OR (t.first = ?10 AND (t.created_at < ` + myArrival + `
		OR (t.created_at = ` + myArrival + ` AND (t.seq < ` + mySeq + ` OR (t.seq = ` + mySeq + ` AND t.lease_id < ?2))))))`

// relatedJobBeforeSQL: job h of a related line is ready and was submitted before the caller.
// Both lists of states: the partial index of unfinished jobs by resource serves the lookups
// (INDEXED BY: without statistics SQLite would rather read every unfinished job of a state).
const relatedJobBeforeSQL = `h.head AND h.state IN ` + sqlUnfinished + ` AND h.state IN ` + sqlClaimable + `
	AND h.scheduled_at <= ?4 AND h.created_at <= ` + myArrival

// relatedFreeSQL is the tree statement's condition on the related keys of ?1: the ancestors ?12
// (a JSON array) and the descendants in [?13, ?14). None is held or rests in its lock-delay
// (a row of leases_tree_live whose available_at is to come: a live lease or hold, or an expiry or
// force-release within its lock-delay), and, unless the caller renews its own lease, no live
// ticket and no ready job of theirs arrived before it (none for a break-glass request: it is
// before every one of them).
const relatedFreeSQL = `NOT EXISTS (SELECT 1 FROM leases r WHERE r.key IN (SELECT value FROM json_each(?12)) AND r.ended <> 1 AND r.available_at > ?4)
		AND NOT EXISTS (SELECT 1 FROM leases r WHERE r.tree AND r.ended <> 1 AND r.key >= ?13 AND r.key < ?14 AND r.available_at > ?4)
		AND (` + ownLeaseSQL + ` OR (` + ownLineFreeSQL + `
			AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.key IN (SELECT value FROM json_each(?12)) AND ` + relatedTicketBeforeSQL + `)
			AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.key >= ?13 AND t.key < ?14 AND ` + relatedTicketBeforeSQL + `)
			AND (?10 OR (NOT EXISTS (SELECT 1 FROM jobs h INDEXED BY jobs_unfinished_by_resource WHERE h.resource IN (SELECT value FROM json_each(?12)) AND ` + relatedJobBeforeSQL + `)
				AND NOT EXISTS (SELECT 1 FROM jobs h INDEXED BY jobs_unfinished_by_resource WHERE h.resource >= ?13 AND h.resource < ?14 AND ` + relatedJobBeforeSQL + `)))))`

// treeAcquireSQL is the acquire statement (statements.go) for an exclusive request of one key of
// the tree ?11, with the checks of relatedFreeSQL; it also refuses if the tree is gone (the
// caller's memory of the trees was stale). The row is marked a tree key's.
// ?1..?10 as the acquire statement's; ?11 prefix, ?12 ancestors (JSON), ?13, ?14 the descendant
// range.
const treeAcquireSQL = `INSERT INTO leases AS a (key, lease_id, holder, owner, token, acquired_at, expires_at, ended,
		available_at, cooldown_ns, lock_delay_ns, metadata, tree)
	SELECT ?1, ?2, ?3, ?9, (SELECT value + 1 FROM counters WHERE name = 'token'), ?4, ?4 + ?5, 0,
		?4 + ?5 + ?7, ?6, ?7, ?8, 1
	WHERE EXISTS (SELECT 1 FROM trees WHERE prefix = ?11) AND ` + notRatedSQL + `
		AND coalesce((SELECT cooldown_until FROM resources WHERE key = ?1), 0) <= ?4
		AND NOT EXISTS (SELECT 1 FROM jobs WHERE resource = ?1 AND state = 'running' AND lease_expires_at > ?4)
		AND ` + relatedFreeSQL + `
	` + acquireUpsertSQL + `,
		tree          = 1` + acquireUpsertEndSQL

// acquireTree grants an exclusive request for key p.Key of the tree of prefix, or refuses it
// (enqueuing its ticket if it waits), as Acquire does for a flat key. again is true when the
// tree is gone: the cache was reloaded and the caller starts over.
func (s *Store) acquireTree(ctx context.Context, p *store.AcquireParams, prefix string) (l *store.Lease, err error, again bool) {
	if err := store.ValidateTreeKey("key", p.Key, prefix); err != nil {
		return nil, err, false
	}
	ancestors := jsonList(store.TreeAncestors(p.Key, prefix))
	lo, hi := store.DescendantRange(p.Key)
	for {
		now := s.now().UnixNano()
		var r row
		var tookOver bool
		err := s.stmts.treeAcquire.QueryRowContext(ctx, p.Key, p.LeaseID, p.Holder, now, int64(p.TTL),
			int64(p.Cooldown), int64(p.LockDelay), nullable(p.Metadata), p.Owner, p.First, prefix, ancestors, lo, hi).Scan(r.fields(&tookOver)...)
		if err == nil {
			l := r.lease(now)
			l.TookOver = tookOver
			return l, nil, false
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, s.wrap("acquire", err), false
		}
		refusal, gone, err := s.treeRefusal(ctx, p, prefix)
		switch {
		case err != nil:
			return nil, err, false
		case gone:
			return nil, s.loadTrees(ctx), true
		case refusal != nil:
			if p.Wait {
				if err := s.enqueue(ctx, p); err != nil {
					return nil, err, false
				}
			}
			return nil, refusal, false
		}
		if err := ctx.Err(); err != nil {
			return nil, err, false
		}
	}
}

// treeRefusal says why the tree statement granted p nothing: what refuses a flat key (its own
// row, job side and line; refusal), else a related key (relatedRefusal). gone: the tree was
// deleted. nil, false if nothing refuses it any more.
func (s *Store) treeRefusal(ctx context.Context, p *store.AcquireParams, prefix string) (refusal error, gone bool, err error) {
	if refusal, err := s.refusal(ctx, p); err != nil || refusal != nil {
		return refusal, false, err
	}
	err = s.holdTx(ctx, "acquire", func(tx *sql.Tx, now int64) error {
		refusal, gone = nil, false
		got, err := s.treeOfTx(ctx, tx, p.Key)
		if err != nil || got != prefix {
			gone = true
			return err
		}
		if rs, err := grantRates(ctx, tx, []string{p.Key}, nil); err != nil || len(rs) > 0 {
			// Under a rated prefix another process set: the way of holds counts its rate.
			gone = true
			return err
		}
		me, err := s.myPlace(ctx, tx, p, now)
		if err != nil {
			return err
		}
		refusal, err = s.relatedRefusal(ctx, tx, p, p.Key, prefix, now, me)
		return err
	})
	return refusal, gone, err
}

var (
	// sqlTreeHolder: a holder of a key related to the request that conflicts with it, or a rest
	// of one: ?1 ancestors (JSON), [?2, ?3) the descendants, ?4 now, ?5 a shared request. A
	// lease's row (exclusive) live or in its lock-delay; a key's summary row of holds in its
	// lock-delay (its live holds answer for it); a live hold, exclusive for a shared request.
	sqlTreeHolder = hq(`SELECT key, lease_id, holder, token, expires_at, available_at, mode FROM (
		SELECT r.key, r.lease_id, r.holder, r.token, r.expires_at, r.available_at, 'exclusive' AS mode FROM leases r
			WHERE r.key IN (SELECT value FROM json_each(?1)) AND r.ended <> 1 AND r.available_at > ?4
				AND (r.lease_id <> '' OR r.expires_at <= ?4)
		UNION ALL
		SELECT r.key, r.lease_id, r.holder, r.token, r.expires_at, r.available_at, 'exclusive' FROM leases r
			WHERE r.tree AND r.ended <> 1 AND r.key >= ?2 AND r.key < ?3 AND r.available_at > ?4
				AND (r.lease_id <> '' OR r.expires_at <= ?4)
		UNION ALL
		SELECT h.key, h.lease_id, h.holder, h.token, h.expires_at, h.expires_at, h.mode FROM holds h
			WHERE h.key IN (SELECT value FROM json_each(?1)) AND h.ended = 0 AND h.mode <> 'unit' AND h.expires_at > ?4
				AND NOT (?5 AND h.mode = 'shared')
		UNION ALL
		SELECT h.key, h.lease_id, h.holder, h.token, h.expires_at, h.expires_at, h.mode FROM holds h
			WHERE h.ended = 0 AND h.mode <> 'unit' AND h.key >= ?2 AND h.key < ?3 AND h.expires_at > ?4
				AND NOT (?5 AND h.mode = 'shared')
	) ORDER BY expires_at > ?4 DESC, expires_at DESC LIMIT 1`)
	// sqlTreeTickets: the live tickets of related lines before the caller, first first: ?1..?5
	// as sqlTreeHolder's, ?6 lease_id, ?7 the caller has a place (?8 at, ?9 seq), ?10 first.
	// An exclusive ticket only, for a shared request.
	sqlTreeTickets = hq(`SELECT key, holder FROM (
		SELECT t.key, t.holder, t.first, t.created_at, t.seq, t.lease_id FROM tickets t
			WHERE t.key IN (SELECT value FROM json_each(?1)) AND ` + treeTicketBefore + `
		UNION ALL
		SELECT t.key, t.holder, t.first, t.created_at, t.seq, t.lease_id FROM tickets t
			WHERE t.key >= ?2 AND t.key < ?3 AND ` + treeTicketBefore + `
	) ORDER BY first DESC, created_at, seq, lease_id LIMIT 1000`)
	// sqlTreeJobs: the ready jobs of related lines submitted by ?6 (the caller's arrival), but
	// job ?7 (the caller, if a job); for a shared request (?5), every exclusive one, head or not
	// (as sqlJobsAhead). ?1..?4 as sqlTreeHolder's.
	sqlTreeJobs = hq(`SELECT id, resource FROM (
		SELECT id, resource, created_at FROM jobs INDEXED BY jobs_unfinished_by_resource WHERE resource IN (SELECT value FROM json_each(?1)) AND ` + treeJobBefore + `
		UNION ALL
		SELECT id, resource, created_at FROM jobs INDEXED BY jobs_unfinished_by_resource WHERE resource >= ?2 AND resource < ?3 AND ` + treeJobBefore + `
	) ORDER BY created_at, id LIMIT 1000`)
)

const (
	treeTicketBefore = `t.lease_id <> ?6 AND t.expires_at > ?4 AND NOT (?5 AND t.mode = 'shared')
		AND (t.first > ?10 OR (t.first = ?10 AND (?7 = 0 OR t.created_at < ?8
			OR (t.created_at = ?8 AND (t.seq < ?9 OR (t.seq = ?9 AND t.lease_id < ?6))))))`
	treeJobBefore = `(head OR ?5) AND state IN ` + sqlUnfinished + ` AND state IN ` + sqlClaimable + `
		AND scheduled_at <= ?4 AND created_at <= ?6 AND id <> ?7
		AND NOT (?5 AND beyond IS NOT NULL AND json_extract(beyond, '$.shared'))`
)

// relatedRefusal says why key k of the tree of prefix cannot be granted to p now because of a
// related key: a holder that conflicts, a lock-delay, or a ticket or ready job that arrived
// before the caller (place me) and conflicts. nil if none. A refusal names the request's key
// (and k as its Resource if it is not p.Key) and the related key (Related).
func (s *Store) relatedRefusal(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, k, prefix string, now int64, me place) (error, error) {
	resource := ""
	if k != p.Key {
		resource = k
	}
	ancestors := jsonList(store.TreeAncestors(k, prefix))
	lo, hi := store.DescendantRange(k)
	var key, leaseID, holder, mode string
	var token, expires, available int64
	err := s.hq(ctx, tx, sqlTreeHolder).QueryRowContext(ctx, ancestors, lo, hi, now, p.Shared).
		Scan(&key, &leaseID, &holder, &token, &expires, &available, &mode)
	switch {
	case err == nil && expires <= now:
		return &store.RestingError{Key: key, Reason: store.ReasonLockDelay, Remaining: time.Duration(available - now)}, nil
	case err == nil:
		if id, ok := store.JobOfLeaseID(leaseID); ok {
			holder = store.JobHolder(id)
		}
		return &store.LockHeldError{Key: p.Key, Resource: resource, Related: key, Holder: holder, Token: uint64(token),
			Shared: mode == "shared", ExpiresAt: time.Unix(0, expires), RetryAfter: time.Duration(expires - now)}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, err
	}
	rows, err := s.hq(ctx, tx, sqlTreeTickets).QueryContext(ctx, ancestors, lo, hi, now, p.Shared, p.LeaseID, me.has, me.at, me.seq, p.First)
	if err != nil {
		return nil, err
	}
	var e *store.LockHeldError
	for rows.Next() {
		if err := rows.Scan(&key, &holder); err != nil {
			rows.Close()
			return nil, err
		}
		if e == nil {
			e = &store.LockHeldError{Key: p.Key, Resource: resource, Related: key, Holder: holder}
		}
		e.Ahead++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !p.First {
		arrival := now
		if me.has {
			arrival = me.at
		}
		rows, err := s.hq(ctx, tx, sqlTreeJobs).QueryContext(ctx, ancestors, lo, hi, now, p.Shared, arrival, me.job)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id, &key); err != nil {
				rows.Close()
				return nil, err
			}
			if e == nil {
				e = &store.LockHeldError{Key: p.Key, Resource: resource, Related: key, Holder: store.JobHolder(id)}
			}
			e.Ahead++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if e == nil {
		return nil, nil
	}
	return e, nil
}

// checkTreeKeys validates the keys of a request that lie in a tree (field "key" for p.Key,
// "resources" for the others), read in tx, and returns their trees' prefixes ("" for a flat key).
func (s *Store) checkTreeKeys(ctx context.Context, tx *sql.Tx, p *store.AcquireParams) ([]string, error) {
	keys := p.Keys()
	prefixes := make([]string, len(keys))
	for i, k := range keys {
		prefix, err := s.treeOfTx(ctx, tx, k)
		if err != nil {
			return nil, err
		}
		if prefix != "" {
			field := "key"
			if i > 0 {
				field = "resources"
			}
			if err := store.ValidateTreeKey(field, k, prefix); err != nil {
				return nil, err
			}
		}
		prefixes[i] = prefix
	}
	return prefixes, nil
}
