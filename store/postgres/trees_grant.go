package postgres

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// Grants in trees (store/trees.go). Every key of a tree is granted through holds (holds.go): a
// lease on one, shared or exclusive, and a job whose resource is one (store.Job.Tree). A plain
// exclusive request for one key is first tried in one round trip (trees_one.go), which takes the
// same locks and reads the same things as the transaction below, and hands back to it what it
// does not decide; a lease on a tree key is released in one round trip too. The transaction of
// a grant beyond one key does, for a key in a tree, what it does for any key, and more:
//   - its locks (lockTree) take the rows of the key's ancestors too, FOR SHARE, in the one
//     order of all its locks (lockTreeSQL): a grant of a related key waits for it, or it for
//     that grant, and reads what that one wrote; grants of siblings go together;
//   - after them it reads, in a fresh snapshot, what it meets on the key's related keys
//     (relatedSQL): conflicting holders on its ancestors (point lookups) and descendants (one
//     range of holds_by_key), their lock-delays, and the tickets and ready jobs of their lines
//     that arrived before it and conflict with it;
//   - a refusal names the related key (store.LockHeldError.Related).
//
// A release (and the end of a job's attempt) locks the same rows as the grant did, and wakes,
// in its transaction, the fronts of the lines related to the keys it freed: a waiter that read
// the key held committed its ticket before the release read the lines, or read the key freed.

// buildTreeHoldQueries adds the statements of trees to hq; q replaces the tables' names, and
// justEnded selects the keys whose holds the release just ended (holdQueries.settleEnded's).
func buildTreeHoldQueries(hq *holdQueries, q func(string) string, justEnded string) {
	hq.lockTree = q(lockTreeSQL(`$1::text[]`))
	// The locks of the one-round-trip grant (trees_one.go): the same, and whether every row was
	// found (and so locked), kept for the statement after it in the transaction's setting
	// baton.tree_locked.
	hq.lockTreeOne = q(`SELECT set_config('baton.tree_locked', coalesce(bool_and(x.found), false)::text, true) FROM (` +
		lockTreeSQL(`$1::text[]`) + `) x (key, req, prefix, found, lease_id, holder, token, expires_at, available_at, ended, job_id)`)
	hq.related = q(relatedSQL)
	hq.treeOne = treeOneSQL(hq, q)
	hq.relatedAt = nowOr(hq.related, 4, 8, 10)
	ended := `ARRAY(` + justEnded + ` AND mode <> 'unit')`
	hq.lockTreeOf = q(lockTreeSQL(`ARRAY(SELECT key FROM {holds} WHERE lease_id = $1 AND lease_key = $2 AND owner = $3
	AND ended = 0 AND mode <> 'unit')`))
	hq.wakeRelatedEnded, hq.notifyRelatedEnded = relatedWakeSQL(hq.wake, hq.notifyJobs, q(ended), nowSetting)
	hq.wakeRelatedEnded, hq.notifyRelatedEnded = q(hq.wakeRelatedEnded), q(hq.notifyRelatedEnded)
	// A force-release: the keys $1 at $2.
	hq.wakeRelated, hq.notifyRelated = relatedWakeSQL(hq.wake, hq.notifyJobs, `$1::text[]`, `$2::timestamptz`)
	hq.wakeRelated, hq.notifyRelated = q(hq.wakeRelated), q(hq.notifyRelated)
}

// lockedTree is what lockTree read: the request's keys' trees and rows, and the keys (the
// request's and their ancestors') whose rows are missing.
type lockedTree struct {
	prefixes map[string]string
	rows     map[string]*keyRow
	missing  []string
}

// scanLockTree reads lockTree's rows.
func scanLockTree(rows pgx.Rows) (*lockedTree, error) {
	defer rows.Close()
	lt := &lockedTree{prefixes: map[string]string{}, rows: map[string]*keyRow{}}
	for rows.Next() {
		var k, prefix string
		var req, found bool
		r := &keyRow{}
		if err := rows.Scan(&k, &req, &prefix, &found, &r.leaseID, &r.holder, &r.token, &r.expiresAt, &r.availableAt,
			&r.ended, &r.jobID); err != nil {
			return nil, err
		}
		if !found {
			lt.missing = append(lt.missing, k)
			continue
		}
		if req {
			lt.rows[k] = r
			lt.prefixes[k] = prefix
		}
	}
	return lt, rows.Err()
}

// relatedRead is what relatedSQL read for a key of a tree.
type relatedRead struct {
	holdKey, holdLease, holdHolder, holdMode *string
	holdToken                                *int64
	holdExpires                              *time.Time
	restKey                                  *string
	restUntil                                *time.Time
	tickets                                  int
	ticketKey, ticketHolder                  *string
	ticketAt                                 *time.Time
	jobs                                     int
	jobID                                    *int64
	jobResource                              *string
	jobAt                                    *time.Time
}

// queueRelated queues relatedSQL for each key of p in a tree (prefixes), for a caller at place me
// (or its arrival, for a job), at now (nil: the instant setNow kept), in the order of p.Keys().
func (s *Store) queueRelated(b *pgx.Batch, p *store.AcquireParams, prefixes map[string]string, now *time.Time, me place) {
	arrival := now
	if me.has {
		arrival = &me.at
	}
	for _, k := range p.Keys() {
		if prefix := prefixes[k]; prefix != "" {
			lo, hi := store.DescendantRange(k)
			b.Queue(s.hq.relatedAt, store.TreeAncestors(k, prefix), lo, hi, now, p.Shared, p.LeaseID, me.has, arrival, me.seq, arrival)
		}
	}
}

// readRelated reads the results of queueRelated, by key.
func readRelated(br pgx.BatchResults, p *store.AcquireParams, prefixes map[string]string) (map[string]*relatedRead, error) {
	out := map[string]*relatedRead{}
	for _, k := range p.Keys() {
		if prefixes[k] == "" {
			continue
		}
		r := &relatedRead{}
		if err := br.QueryRow().Scan(&r.holdKey, &r.holdLease, &r.holdHolder, &r.holdToken, &r.holdExpires, &r.holdMode,
			&r.restKey, &r.restUntil, &r.tickets, &r.ticketKey, &r.ticketHolder, &r.ticketAt,
			&r.jobs, &r.jobID, &r.jobResource, &r.jobAt); err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

// relatedRefusal says why key k (of the request p) cannot be granted now because of a related
// key, from what relatedSQL read: a conflicting holder, a lock-delay, or tickets and ready jobs
// of related lines before the caller that conflict with it. nil if none.
func relatedRefusal(p *store.AcquireParams, k string, now time.Time, r *relatedRead) error {
	resource := ""
	if k != p.Key {
		resource = k
	}
	switch {
	case r.holdKey != nil:
		holder := *r.holdHolder
		if id, ok := store.JobOfLeaseID(*r.holdLease); ok {
			holder = store.JobHolder(id) // a job's attempt, whichever worker runs it
		}
		return &store.LockHeldError{Key: p.Key, Resource: resource, Related: *r.holdKey, Holder: holder,
			Token: uint64(*r.holdToken), Shared: *r.holdMode == "shared", ExpiresAt: *r.holdExpires,
			RetryAfter: r.holdExpires.Sub(now)}
	case r.restKey != nil:
		return &store.RestingError{Key: *r.restKey, Reason: store.ReasonLockDelay, Remaining: r.restUntil.Sub(now)}
	case r.tickets+r.jobs == 0:
		return nil
	}
	e := &store.LockHeldError{Key: p.Key, Resource: resource, Ahead: r.tickets + r.jobs}
	if r.ticketKey != nil && (r.jobID == nil || !r.jobAt.Before(*r.ticketAt)) {
		e.Related, e.Holder = *r.ticketKey, *r.ticketHolder
	} else {
		e.Related, e.Holder = *r.jobResource, store.JobHolder(*r.jobID)
	}
	if e.Related == k {
		e.Related = ""
	}
	return e
}

func itoa(n int) string { return strconv.Itoa(n) }

// validateTreeKeys checks the keys of p that lie in trees (prefixes, as the transaction read
// them): "key" names p.Key, "resources" the others.
func validateTreeKeys(p *store.AcquireParams, prefixes map[string]string) error {
	for i, k := range p.Keys() {
		if prefix := prefixes[k]; prefix != "" {
			field := "key"
			if i > 0 {
				field = "resources"
			}
			if err := store.ValidateTreeKey(field, k, prefix); err != nil {
				return err
			}
		}
	}
	return nil
}
