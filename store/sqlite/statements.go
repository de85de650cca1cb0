package sqlite

import (
	"context"
	"database/sql"
)

const leaseColumns = `key, lease_id, holder, owner, token, acquired_at, expires_at, ended, available_at, metadata`

// statements are prepared once per Store.
type statements struct {
	runningJob, resourceRest, headKind, line, enqueue, leave                   *sql.Stmt
	selectRow, acquire, renew, release, heldFor, releasedBy, forceRelease, get *sql.Stmt
	// treeAcquire is acquire for a key of a tree (trees_grant.go); relatedWaiting finds the
	// related lines to wake (trees.go).
	treeAcquire, relatedWaiting *sql.Stmt
	// list holds one statement per shape of keyRange, so that each reads the primary key as
	// one range.
	list [4]*sql.Stmt
	// events holds one statement per order (oldest or newest first) and filter (all keys or
	// one), indexed by EventsParams.Shape.
	events [4]*sql.Stmt
}

// notInTreeSQL holds when key ?1 is in no tree: the one prefix that may hold it (the greatest at
// or below store.TreeProbe, found with one probe of the trees' primary key) is not a prefix of
// the probe. With no tree at all it reads an empty table.
const notInTreeSQL = `coalesce((SELECT substr(?1 || '/', 1, length(m)) = m FROM (SELECT max(prefix) AS m FROM trees WHERE prefix <= ?1 || '/')), 0) = 0`

// notRatedSQL holds when key ?1 is under no rated prefix (rates.go): the one rated prefix that
// may be a prefix of it (the greatest at or below it, one probe of the primary key) is not. With
// no rated prefix it reads an empty table. A key under one is granted through holds, which
// count its rate.
const notRatedSQL = `coalesce((SELECT substr(?1, 1, length(m)) = m FROM (SELECT max(prefix) AS m FROM rate_prefixes WHERE prefix <= ?1)), 0) = 0`

// acquireSQL grants a free key (available_at <= now: released, expired or force-released
// and past its cooldown or lock-delay) or renews the live lease of the same holder and
// owner, in one statement, and returns nothing if it did neither (a live lease of the
// same holder and another owner is not the caller's: nothing changes). The token is the
// counter plus one, read inside the statement's write transaction; the triggers advance
// the counter. The idempotent re-acquire keeps ID, token, acquisition time and metadata.
// One resource, one line: the key is not granted while a job attempt holds it (a running
// job on the resource whose attempt's lease is live) or while the resource rests after a
// job (its resource cooldown). Both are read in the statement's write transaction, and
// a claim reads the lease row in its own (see ClaimJobs), so neither side can act on a
// stale read: SQLite runs one writer at a time. The SELECT's WHERE holds for the
// re-acquire by the lease's own holder too, which can only be live when no job is.
// The line (lineFreeSQL): nobody is granted a free key while a ticket or a ready job that
// arrived first waits; the grant ends the caller's own ticket (a trigger).
// ?1 key, ?2 lease_id, ?3 holder, ?4 now, ?5 ttl, ?6 cooldown, ?7 lock delay, ?8 metadata,
// ?9 owner, ?10 first (break-glass).
// A key of a tree is not granted here (notInTreeSQL), but by treeAcquire; nor a key under a
// rated prefix (notRatedSQL), but by acquireBeyond.
const acquireSQL = `INSERT INTO leases AS a (key, lease_id, holder, owner, token, acquired_at, expires_at, ended,
		available_at, cooldown_ns, lock_delay_ns, metadata)
	SELECT ?1, ?2, ?3, ?9, (SELECT value + 1 FROM counters WHERE name = 'token'), ?4, ?4 + ?5, 0,
		?4 + ?5 + ?7, ?6, ?7, ?8
	WHERE ` + notInTreeSQL + ` AND ` + notRatedSQL + `
		AND NOT EXISTS (SELECT 1 FROM jobs WHERE resource = ?1 AND state = 'running' AND lease_expires_at > ?4)
		AND coalesce((SELECT cooldown_until FROM resources WHERE key = ?1), 0) <= ?4
		AND ` + lineFreeSQL + `
	` + acquireUpsertSQL + acquireUpsertEndSQL

// acquireUpsertSQL takes over a key's row that is available at ?4 (every column the grant sets,
// as excluded), or renews the caller's own live lease (same holder and owner: only its expiry);
// it ends with "ended = 0", so that a statement may set more columns after it.
// acquireUpsertEndSQL is its WHERE and the RETURNING of an acquire. ?1..?10 as acquireSQL's.
const acquireUpsertSQL = `ON CONFLICT (key) DO UPDATE SET
		lease_id      = iif(a.available_at <= ?4, excluded.lease_id, a.lease_id),
		holder        = iif(a.available_at <= ?4, excluded.holder, a.holder),
		owner         = iif(a.available_at <= ?4, excluded.owner, a.owner),
		token         = iif(a.available_at <= ?4, excluded.token, a.token),
		acquired_at   = iif(a.available_at <= ?4, excluded.acquired_at, a.acquired_at),
		metadata      = iif(a.available_at <= ?4, excluded.metadata, a.metadata),
		cooldown_ns   = iif(a.available_at <= ?4, excluded.cooldown_ns, a.cooldown_ns),
		lock_delay_ns = iif(a.available_at <= ?4, excluded.lock_delay_ns, a.lock_delay_ns),
		available_at  = iif(a.available_at <= ?4, excluded.available_at, ?4 + ?5 + a.lock_delay_ns),
		expires_at    = ?4 + ?5,
		took_over     = iif(a.available_at <= ?4, a.ended = 0, a.took_over),
		ended         = 0`

const acquireUpsertEndSQL = `
	WHERE a.available_at <= ?4 OR (a.ended = 0 AND a.expires_at > ?4 AND a.holder = ?3 AND a.owner = ?9 AND a.lease_id <> '')
	RETURNING ` + leaseColumns + `, took_over`

// eventsSQL is Events' statement for one shape. A key filter is its own statement, not
// "key = ?2 unless ?2 is empty": the planner cannot use events_by_key (key, id) for a condition that
// may match every key, and scans the whole log for a rare key's page. ?1 the id cursor, ?2 key
// (unused without a filter; a numbered parameter may go unused), ?3 limit.
func eventsSQL(shape int) string {
	cmp, order := "id > ?1", "id"
	if shape&1 != 0 {
		cmp, order = "id < ?1", "id DESC"
	}
	if shape&2 != 0 {
		cmp += " AND key = ?2"
	}
	return `SELECT id, at, kind, key, lease_id, holder, token, actor, principal, reason, job_id, job_kind, attempt, outcome, limit_name FROM events
			WHERE ` + cmp + ` ORDER BY ` + order + ` LIMIT ?3`
}

// listSQL is List's statement for one shape of keyRange. ?1, ?2 the key range; ?3 holder or
// ”; ?4 now; ?5 limit.
func listSQL(shape int) string {
	return `SELECT ` + leaseColumns + ` FROM leases
			WHERE ` + keyRangeSQL(shape) + ` AND (?3 = '' OR holder = ?3) AND ended = 0 AND expires_at > ?4
			ORDER BY key LIMIT ?5`
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&st.selectRow, `SELECT ` + leaseColumns + ` FROM leases WHERE key = ?`},
		{&st.line, lineSQL},
		{&st.enqueue, enqueueSQL},
		// A request's tickets: in its key's line, and in every other line of a request for several
		// keys or limits (lease_key). ?1 key, ?2 lease_id, ?3 owner.
		{&st.leave, `DELETE FROM tickets WHERE lease_id = ?2 AND owner = ?3 AND (key = ?1 OR lease_key = ?1) RETURNING key`},
		// The job attempt that holds a resource, and the resource's rest after a job: what a
		// refused acquire names when no lease refused it. ?1 key, ?2 now.
		{&st.runningJob, `SELECT id, token, lease_expires_at FROM jobs
			WHERE resource = ?1 AND state = 'running' AND lease_expires_at > ?2 AND beyond IS NULL`},
		{&st.resourceRest, `SELECT cooldown_until FROM resources WHERE key = ?1 AND cooldown_until > ?2`},
		// The kind of the resource's head, if it waits to be claimed: a release wakes its workers.
		{&st.headKind, `SELECT kind FROM jobs WHERE resource = ?1 AND head AND state IN ` + sqlClaimable + ` LIMIT 1`},
		{&st.acquire, acquireSQL},
		// ?1 key, ?2 lease_id, ?3 now, ?4 ttl, ?5 owner.
		{&st.renew, `UPDATE leases SET expires_at = ?3 + ?4, available_at = ?3 + ?4 + lock_delay_ns
			WHERE key = ?1 AND lease_id = ?2 AND owner = ?5 AND ended = 0 AND expires_at > ?3
			RETURNING ` + leaseColumns},
		// ?1 key, ?2 lease_id, ?3 now, ?4 owner.
		{&st.release, `UPDATE leases SET ended = 1, available_at = ?3 + cooldown_ns
			WHERE key = ?1 AND lease_id = ?2 AND owner = ?4 AND ended = 0 AND expires_at > ?3`},
		// The hold time is read after the release commits: UPDATE … RETURNING through this
		// driver halves release throughput. ?1 key, ?2 lease_id, ?3 now.
		{&st.heldFor, `SELECT ?3 - acquired_at FROM leases WHERE key = ?1 AND lease_id = ?2 AND ended = 1`},
		// Only the owner learns that its lease was released already. ?1 key, ?2 lease_id, ?3 owner.
		{&st.releasedBy, `SELECT count(*) FROM leases WHERE key = ?1 AND lease_id = ?2 AND owner = ?3 AND ended = 1`},
		// ?1 key, ?2 now, ?3 actor, ?4 reason, ?5 principal.
		{&st.forceRelease, `UPDATE leases SET ended = 2, expires_at = min(expires_at, ?2), available_at = ?2 + lock_delay_ns,
				end_actor = ?3, end_reason = ?4, end_principal = ?5
			WHERE key = ?1 AND ended = 0 AND expires_at > ?2
			RETURNING ` + leaseColumns},
		{&st.get, `SELECT ` + leaseColumns + ` FROM leases WHERE key = ?1 AND ended = 0 AND expires_at > ?2`},
		{&st.treeAcquire, treeAcquireSQL},
		{&st.relatedWaiting, sqlRelatedWaiting},
		{&st.list[0], listSQL(0)},
		{&st.list[1], listSQL(1)},
		{&st.list[2], listSQL(2)},
		{&st.list[3], listSQL(3)},
		{&st.events[0], eventsSQL(0)},
		{&st.events[1], eventsSQL(1)},
		{&st.events[2], eventsSQL(2)},
		{&st.events[3], eventsSQL(3)},
	} {
		stmt, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return err
		}
		*p.dst = stmt
	}
	return nil
}

func (st *statements) close() {
	for _, s := range append([]*sql.Stmt{st.runningJob, st.resourceRest, st.headKind, st.line, st.enqueue, st.leave, st.selectRow, st.acquire, st.renew, st.release, st.heldFor,
		st.releasedBy, st.forceRelease, st.get, st.treeAcquire, st.relatedWaiting}, append(st.list[:], st.events[:]...)...) {
		if s != nil {
			s.Close()
		}
	}
}
