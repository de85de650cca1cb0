package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// Beyond one at a time (store/holds.go, migrations/0012_holds.sql): a request for a shared hold,
// several keys or units of limits runs as one READ COMMITTED transaction. It first locks the
// leases rows of all its keys (SELECT … FOR UPDATE, in key order; with the rows of the
// ancestors of its keys in trees FOR SHARE, in the same order: lockTreeSQL) and then its limits'
// rows (in name order): every plain statement locks one leases row, so no two of them wait for
// each other in a cycle. Every later statement of the transaction reads a fresh snapshot, taken after the
// locks: the rows, their holds, their lines and the limits' use as the last grant of each left
// them. It then grants all (one token, a holds row per key and unit, the keys' summary rows) or
// enqueues the caller in every line of the request with one arrival.
//
// A key must have its leases row before the transaction relies on it: a claim of a job on a key
// without one takes no gate (resource_line.go), and a grant in a tree waits for a grant of a
// related key only on a row that exists. A key (or ancestor) that has none is made a lock key
// first (markLockKey) and the transaction is run again.

// holdQueries are the statements of holds.go and limits.go, built once at open.
type holdQueries struct {
	lockRows, lockLimits, reacquire, place, keyLine, limitUse, markWaiters, refresh,
	dropTickets, enqueue, keysOf, renewHolds, renewRows, refreshJob,
	countEnded, settle, forceEndHolds, fronts, notify, notifyJobs, setLimit, lockLimit, limitInUse,
	deleteLimit, dropLine, readLimits, limitHolders string
	// The statements of the batches (holds_pipe.go).
	endHoldsNow, grantHoldsCur, grantRowsCur, wake string
	keyHolders, relatedHolders                     string
	// reacquire, place, keyLine and limitUse with their instants (now, arrival)
	// NULL for the one setNow kept: they go in the batch of the locks.
	reacquireAt, placeAt, keyLineAt, limitUseAt string
	// settle, wake and notifyJobs of the holds a release (endHoldsNow) just ended.
	settleEnded, wakeEnded, notifyJobsEnded string
	// The end of job attempts' holds (jobs_beyond.go).
	lockJobHolds, endJobHolds, settleJobEnded, wakeJobEnded, notifyJobsJobEnded string
	// Trees (trees_grant.go, trees_sql.go): the locks of a grant and of a release or an end,
	// what a grant meets on its related keys, and the wakes of the lines related to what a
	// release, an end or a force-release freed.
	lockTree, related, relatedAt, lockTreeOf, wakeRelatedEnded, notifyRelatedEnded, wakeRelated, notifyRelated string
	wakeRelatedJobEnded, notifyRelatedJobEnded                                                                 string
	// The exclusive grant of one tree key, and the release of a lease on one, in one round trip
	// each (trees_one.go).
	treeOne, treeRelease, lockTreeOne string
}

// beforeMe selects the live tickets of line $1 that are before the caller (lease ID $2) at $3:
// break-glass ones, and, if the caller has a place ($4, at $5 with seq $6), those that arrived
// before it; without a place, every live ticket of another request.
const beforeMe = `FROM {tickets} t WHERE t.key = $1 AND t.lease_id <> $2 AND t.expires_at > $3
	AND (NOT $4::boolean OR t.first OR (t.created_at, t.seq) < ($5::timestamptz, $6::bigint))`

func buildHoldQueries(schema, channel string) holdQueries {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// The schema and the channel are [a-z0-9_]: their quoted forms hold no single quote.
	r := strings.NewReplacer("{leases}", id("leases"), "{holds}", id("holds"), "{tickets}", id("tickets"),
		"{limits}", id("limits"), "{jobs}", id("jobs"), "{kinds}", id("job_kinds"), "{trees}", id("trees"),
		"{rate_prefixes}", id("rate_prefixes"), "{tokenseq}", "'"+id("token_seq")+"'", "{ticketstable}", "'"+id("tickets")+"'", "{channel}", "'"+channel+"'")
	q := func(sql string) string { return r.Replace(sql) }
	hq := holdQueries{
		// $1 keys.
		lockRows: q(`SELECT key, lease_id, holder, token, expires_at, available_at, ended, job_id FROM {leases}
	WHERE key = ANY ($1::text[]) ORDER BY key FOR UPDATE`),
		// $1 names.
		lockLimits: q(`SELECT name, capacity FROM {limits} WHERE name = ANY ($1::text[]) ORDER BY name FOR UPDATE`),
		// $1 key, $2 holder, $3 owner, $4 now.
		reacquire: q(`SELECT lease_id FROM {holds} WHERE key = $1 AND lease_key = $1 AND holder = $2 AND owner = $3
	AND ended = 0 AND expires_at > $4 LIMIT 1`),
		// $1 lease_id, $2 now, $3 lines.
		place: q(`SELECT created_at, seq FROM {tickets} WHERE lease_id = $1 AND expires_at > $2 AND key = ANY ($3::text[])`),
		// The tickets before the caller in key $1's line (only exclusive ones if $7, a shared
		// request), the first of them, and the key's ready head job if it was submitted before the
		// caller's arrival $8 (for a shared request, its first exclusive ready job, head or not: one
		// waiting behind running shared jobs is no head yet, and must not be overtaken); and the hold that refuses a request on the key if holds hold it
		// (an exclusive one first), or NULLs. $1..$6 as beforeMe.
		keyLine: q(`SELECT (SELECT count(*) ` + beforeMe + ` AND (NOT $7::boolean OR t.mode = 'exclusive')),
	(SELECT t.holder ` + beforeMe + ` AND (NOT $7::boolean OR t.mode = 'exclusive') ORDER BY t.first DESC, t.created_at, t.seq LIMIT 1),
	(SELECT min(h.id) FROM {jobs} h WHERE h.resource = $1 AND (h.head OR $7::boolean) AND h.state IN ('scheduled', 'available', 'retryable')
		AND h.scheduled_at <= $3 AND h.created_at <= $8::timestamptz
		AND E'\x1fjob:' || h.id <> $2 AND NOT ($7::boolean AND h.shared)),
	sh.mode, sh.holder, sh.token, sh.expires_at
FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT mode, holder, token, expires_at FROM {holds}
	WHERE key = $1 AND ended = 0 AND expires_at > $3 ORDER BY mode = 'exclusive' DESC, expires_at LIMIT 1) sh ON true`),
		// A limit's units in use, the soonest expiry and its holder, and the tickets before the
		// caller in its line. $1..$6 as beforeMe.
		limitUse: q(`SELECT count(*), min(expires_at),
	(SELECT holder FROM {holds} WHERE key = $1 AND ended = 0 AND expires_at > $3 ORDER BY expires_at LIMIT 1),
	(SELECT count(*) ` + beforeMe + `)
FROM {holds} WHERE key = $1 AND ended = 0 AND expires_at > $3`),
		// A waiter refused by a plain lease marks it, so that its release NOTIFYs the front.
		// $1 keys, $2 now.
		// A key's summary row of holds is marked too: the release of its holds NOTIFYs a key
		// whose line has no live ticket only if it is marked (wake).
		markWaiters: q(`UPDATE {leases} SET waiters = true WHERE key = ANY ($1::text[]) AND (lease_id <> '' OR job_id = 0)
	AND ended = 0 AND expires_at > $2 AND NOT waiters`),
		// $1 expires, $2 lease_id, $3 owner, $4 lines.
		refresh: q(`UPDATE {tickets} SET expires_at = $1 WHERE lease_id = $2 AND owner = $3 AND key = ANY ($4::text[])`),
		// A job's tickets, whoever claims it. $1 expires, $2 lease_id, $3 lines.
		refreshJob: q(`UPDATE {tickets} SET expires_at = $1 WHERE lease_id = $2 AND key = ANY ($3::text[])`),
		// $1 lease_id, $2 lines.
		dropTickets: q(`DELETE FROM {tickets} WHERE lease_id = $1 AND key = ANY ($2::text[])`),
		// One ticket per line, all with one arrival ($5) and one seq, drawn once from the column's
		// identity sequence, which plain tickets draw theirs from too. $1 lines, $2 lease_id,
		// $3 holder, $4 owner, $6 expires, $7 mode, $8 lease_key.
		enqueue: q(`WITH s AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence({ticketstable}, 'seq')) AS seq)
INSERT INTO {tickets} (key, lease_id, holder, owner, created_at, expires_at, first, actor, reason, seq, mode, lease_key)
OVERRIDING SYSTEM VALUE
SELECT k, $2, $3, $4, $5, $6, false, '', '', s.seq, $7, $8 FROM unnest($1::text[]) AS k, s`),
		// The keys (not units) of the lease ($1 lease_id, $2 lease_key, $3 owner) with holds not
		// ended, to lock their rows first.
		keysOf: q(`SELECT key FROM {holds} WHERE lease_id = $1 AND lease_key = $2 AND owner = $3 AND ended = 0 AND mode <> 'unit'`),
		// $1 lease_id, $2 lease_key, $3 owner, $4 expires, $5 now.
		renewHolds: q(`UPDATE {holds} SET expires_at = $4
WHERE lease_id = $1 AND lease_key = $2 AND owner = $3 AND ended = 0 AND expires_at > $5
RETURNING key, mode, holder, token, acquired_at, metadata, slot`),
		// $1 expires, $2 keys.
		renewRows: q(`UPDATE {leases} SET expires_at = greatest(expires_at, $1),
	available_at = greatest(available_at, $1 + lock_delay_ms * interval '1 millisecond')
WHERE lease_id = '' AND job_id = 0 AND ended = 0 AND key = ANY ($2::text[])`),
		countEnded: q(`SELECT count(*) FROM {holds} WHERE lease_id = $1 AND lease_key = $2 AND owner = $3 AND ended = 1`),
		// Key $1's summary row after some of its holds ended: held until the latest live hold
		// expires, or ended (released); available after cooldown $3 ms from now $2 and after the
		// lock-delay of holds that expired without being released.
		settle: q(`WITH h AS (
	SELECT max(expires_at) FILTER (WHERE expires_at > $2) AS live,
		max(expires_at + lock_delay_ms * interval '1 millisecond') AS delay
	FROM {holds} WHERE key = $1 AND ended = 0
)
UPDATE {leases} l SET expires_at = coalesce(h.live, least(l.expires_at, $2)),
	ended = CASE WHEN h.live IS NULL THEN 1 ELSE 0 END,
	cooldown_ms = CASE WHEN h.live IS NULL THEN $3::bigint ELSE l.cooldown_ms END,
	available_at = greatest($2 + $3::bigint * interval '1 millisecond', coalesce(h.delay, '-infinity'))
FROM h WHERE l.key = $1 AND l.lease_id = '' AND l.job_id = 0 AND l.ended = 0`),
		// Every live lease made of holds that holds key $1 ends, with all it holds. $2 now.
		forceEndHolds: q(`UPDATE {holds} SET ended = 2, expires_at = least(expires_at, $2)
WHERE ended = 0 AND expires_at > $2
	AND lease_id IN (SELECT lease_id FROM {holds} WHERE key = $1 AND ended = 0 AND expires_at > $2)
RETURNING key, mode`),
		// The first live tickets of each line of $1 at $2, in line order: the front, and the shared
		// tickets right behind a shared front, go.
		fronts: q(`SELECT l.line, f.payload, f.mode FROM unnest($1::text[]) WITH ORDINALITY AS l(line, i)
CROSS JOIN LATERAL (
	SELECT ` + frontPayload("{jobs}") + ` AS payload, f.mode, f.first, f.created_at, f.seq FROM {tickets} f
	WHERE f.key = l.line AND f.expires_at > $2 ORDER BY f.first DESC, f.created_at, f.seq LIMIT 16
) f
ORDER BY l.i, f.first DESC, f.created_at, f.seq`),
		// $1 payloads.
		notify: q(`SELECT pg_notify({channel}, p) FROM unnest($1::text[]) AS p`),
		// The workers of the kinds of the keys' ready head jobs, if any wait. $1 keys.
		notifyJobs: q(`SELECT pg_notify({channel}, E'\x1fjob:' || k.name) FROM {jobs} h JOIN {kinds} k ON k.name = h.kind
WHERE h.resource = ANY ($1::text[]) AND h.head AND h.state IN ('scheduled', 'available', 'retryable') AND k.waiting_until > now()`),
		// The lease's live holds end, at the instant setNow kept. $1 lease_id, $2 lease_key, $3 owner.
		endHoldsNow: q(`UPDATE {holds} SET ended = 1, expires_at = least(expires_at, ` + nowSetting + `)
WHERE lease_id = $1 AND lease_key = $2 AND owner = $3 AND ended = 0 AND expires_at > ` + nowSetting + `
RETURNING key, mode, acquired_at, cooldown_ms`),
		// A holds row per key and limit unit under one token, which it draws and returns. $1 lease_id,
		// $2 lease_key, $3 holder, $4 owner, $5 now, $6 expires, $7 cooldown ms, $8 lock delay ms,
		// $9 metadata of the first key, $10 keys and limit lines, $11 modes. A unit (mode 'unit')
		// takes the lowest slot no live unit of its limit holds at $5 (the limit's row is locked),
		// and the statement returns the units' names and slots, in one order.
		grantHoldsCur: q(`WITH t AS MATERIALIZED (SELECT nextval({tokenseq}) AS token), g AS (INSERT INTO {holds} (lease_id, key, mode, lease_key, holder, owner, token, acquired_at, expires_at,
	ended, cooldown_ms, lock_delay_ms, metadata, slot)
SELECT $1, k.key, k.mode, $2, $3, $4, t.token, $5, $6, 0, $7, $8, CASE WHEN k.key = $2 THEN $9::jsonb END,
	CASE WHEN k.mode = 'unit' THEN coalesce(
		(SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM {holds} WHERE key = k.key AND slot = 0 AND ended = 0 AND expires_at > $5)),
		(SELECT min(h.slot) + 1 FROM {holds} h WHERE h.key = k.key AND h.slot IS NOT NULL AND h.ended = 0 AND h.expires_at > $5
			AND NOT EXISTS (SELECT 1 FROM {holds} x WHERE x.key = k.key AND x.slot = h.slot + 1 AND x.ended = 0 AND x.expires_at > $5))) END
FROM unnest($10::text[], $11::text[]) AS k(key, mode), t
ON CONFLICT (lease_id, key) DO UPDATE SET mode = excluded.mode, lease_key = excluded.lease_key,
	holder = excluded.holder, owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
	expires_at = excluded.expires_at, ended = 0, cooldown_ms = excluded.cooldown_ms,
	lock_delay_ms = excluded.lock_delay_ms, metadata = excluded.metadata, slot = excluded.slot
RETURNING key, slot)
SELECT t.token, (SELECT count(*) FROM g), (SELECT array_agg(substr(key, 2)) FROM g WHERE slot IS NOT NULL),
	(SELECT array_agg(slot) FROM g WHERE slot IS NOT NULL) FROM t`),
		// The keys' summary rows (they exist and are locked), under the token grantHoldsCur drew
		// before it in the batch: held until their latest hold expires. A row that sums live holds
		// already keeps the later expiry and the longer rest. It fails (and the batch with it)
		// unless it updated every key's row ($8 of them). A row that did not sum live holds is
		// marked waited for (waiters) if others than the caller ($9 lease_id) wait in its line,
		// as the plain acquire statement marks a lease it grants; one that did keeps its mark.
		// $1 keys, $2 holder, $3 owner, $4 now, $5 expires, $6 lock delay ms, $7 cooldown ms.
		grantRowsCur: q(`WITH u AS (UPDATE {leases} a SET lease_id = '', holder = $2, owner = $3, token = currval({tokenseq}), acquired_at = $4,
	metadata = NULL, took_over = false, job_id = 0, cooldown_ms = $7, ended = 0,
	waiters = (a.lease_id = '' AND a.job_id = 0 AND a.ended = 0 AND a.waiters) OR ` + othersWaitSQL("a.key", "$9", "$4") + `,
	expires_at = CASE WHEN a.lease_id = '' AND a.job_id = 0 AND a.ended = 0 THEN greatest(a.expires_at, $5) ELSE $5 END,
	available_at = CASE WHEN a.lease_id = '' AND a.job_id = 0 AND a.ended = 0
		THEN greatest(a.available_at, $5 + $6::bigint * interval '1 millisecond')
		ELSE $5 + $6::bigint * interval '1 millisecond' END,
	lock_delay_ms = CASE WHEN a.lease_id = '' AND a.job_id = 0 AND a.ended = 0 THEN greatest(a.lock_delay_ms, $6) ELSE $6 END
WHERE a.key = ANY ($1::text[]) RETURNING 1)
SELECT CASE WHEN count(*) = $8 THEN 0 ELSE ('a key''s row vanished under its lock: ' || count(*))::int END FROM u`),
		// wakeLines in one statement: it NOTIFYs, and returns, the payloads of the front ticket of
		// each line of $1 at $2 and of the shared tickets right behind a shared front, then (if $3,
		// after a release) of each key of $1 whose line has no ticket and whose row is marked
		// waited for: as a plain lease's release, which NOTIFYs only if a waiter marked it (a
		// waiter refused by holds marks their summary row: markWaiters, the plain acquire
		// statement), so that a release nobody waits for sends no NOTIFY (whose commit
		// serialises on the database's queue of notifications).
		wake: q(`WITH f AS (
	SELECT l.i, f.payload, row_number() OVER w AS rn, bool_and(f.mode = 'shared') OVER w AS shared_run
	FROM unnest($1::text[]) WITH ORDINALITY AS l(line, i)
	CROSS JOIN LATERAL (
		SELECT ` + frontPayload("{jobs}") + ` AS payload, f.mode, f.first, f.created_at, f.seq FROM {tickets} f
		WHERE f.key = l.line AND f.expires_at > $2 ORDER BY f.first DESC, f.created_at, f.seq LIMIT 16
	) f
	WINDOW w AS (PARTITION BY l.i ORDER BY f.first DESC, f.created_at, f.seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), p AS (
	SELECT 0 AS part, i, rn, payload FROM f WHERE rn = 1 OR shared_run
	UNION ALL
	SELECT 1, l.i, 0, l.line FROM unnest($1::text[]) WITH ORDINALITY AS l(line, i)
	WHERE $3::boolean AND NOT starts_with(l.line, E'\x1e') AND NOT EXISTS (SELECT 1 FROM f WHERE f.i = l.i)
		AND EXISTS (SELECT 1 FROM {leases} w WHERE w.key = l.line AND w.waiters)
)
SELECT x.payload, pg_notify({channel}, x.payload)::text FROM (SELECT * FROM p ORDER BY part, i, rn OFFSET 0) x`),
		// $1 name, $2 capacity.
		// $1 name, $2 capacity, $3 rate max (0: none), $4 rate window ms.
		setLimit: q(`INSERT INTO {limits} (name, capacity, updated_at, rate_max, rate_window_ms) VALUES ($1, $2, now(), $3, $4)
ON CONFLICT (name) DO UPDATE SET capacity = excluded.capacity, updated_at = excluded.updated_at,
	rate_max = excluded.rate_max, rate_window_ms = excluded.rate_window_ms`),
		lockLimit:   q(`SELECT capacity FROM {limits} WHERE name = $1 FOR UPDATE`),
		limitInUse:  q(`SELECT count(*) FROM {holds} WHERE key = $1 AND ended = 0 AND expires_at > now()`),
		deleteLimit: q(`DELETE FROM {limits} WHERE name = $1`),
		dropLine:    q(`DELETE FROM {tickets} WHERE key = $1`),
		// $1 name or '', $2 after, $3 now, $4 limit.
		readLimits: q(`SELECT name, capacity, updated_at, rate_max, rate_window_ms,
	(SELECT count(*) FROM {tickets} t WHERE t.key = E'\x1e' || name AND t.expires_at > $3),
	(SELECT count(*) FROM {holds} h WHERE h.key = E'\x1e' || name AND h.ended = 0 AND h.expires_at > $3)
FROM {limits} WHERE ($1 = '' OR name = $1) AND name > $2 ORDER BY name LIMIT $4`),
		// Key $1's live holds at now(), at most $2, in token order (the resource view's holders).
		keyHolders: q(`SELECT lease_id, mode, holder, owner, token, acquired_at, expires_at,
	(extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM {holds}
WHERE key = $1 AND ended = 0 AND expires_at > now() ORDER BY token LIMIT $2`),
		// The live holds of the keys related to a tree key (ResourceLine.Related): its
		// ancestors $1 and its descendants in [$2, $3), at most $4, in token order. Every grant
		// of a tree key is a hold.
		relatedHolders: q(`SELECT key, lease_id, mode, holder, owner, token, acquired_at, expires_at,
	(extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM {holds}
WHERE (key = ANY ($1::text[]) OR key >= $2 AND key < $3) AND ended = 0 AND mode <> 'unit' AND expires_at > now()
ORDER BY token LIMIT $4`),
		// $1 line, $2 now, $3 limit.
		limitHolders: q(`SELECT lease_key, lease_id, holder, owner, token, acquired_at, expires_at, coalesce(slot, 0) FROM {holds}
WHERE key = $1 AND ended = 0 AND expires_at > $2 ORDER BY token LIMIT $3`),
	}
	// The holds of the lease ($1 lease_id, $2 lease_key, $3 owner) that endHoldsNow ended: at the
	// instant setNow kept (a release before it ended the others at its own, earlier instant).
	justEnded := `SELECT key FROM {holds} WHERE lease_id = $1 AND lease_key = $2 AND owner = $3 AND ended = 1
	AND expires_at = ` + nowSetting
	hq.settleEnded = q(`WITH h AS (
	SELECT e.key, e.cooldown_ms, max(x.expires_at) FILTER (WHERE x.expires_at > ` + nowSetting + `) AS live,
		max(x.expires_at + x.lock_delay_ms * interval '1 millisecond') AS delay
	FROM {holds} e LEFT JOIN {holds} x ON x.key = e.key AND x.ended = 0
	WHERE e.lease_id = $1 AND e.lease_key = $2 AND e.owner = $3 AND e.ended = 1 AND e.expires_at = ` + nowSetting + `
		AND e.mode <> 'unit'
	GROUP BY e.key, e.cooldown_ms
)
UPDATE {leases} l SET expires_at = coalesce(h.live, least(l.expires_at, ` + nowSetting + `)),
	ended = CASE WHEN h.live IS NULL THEN 1 ELSE 0 END,
	cooldown_ms = CASE WHEN h.live IS NULL THEN h.cooldown_ms ELSE l.cooldown_ms END,
	available_at = greatest(` + nowSetting + ` + h.cooldown_ms * interval '1 millisecond', coalesce(h.delay, '-infinity'))
FROM h WHERE l.key = h.key AND l.lease_id = '' AND l.job_id = 0 AND l.ended = 0`)
	// $1 lease_id, $2 lease_key, $3 owner.
	hq.wakeEnded = strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(hq.wake, "$2", nowSetting), "$3::boolean", "true"),
		"unnest($1::text[])", "unnest(ARRAY("+q(justEnded)+" ORDER BY key))")
	hq.notifyJobsEnded = strings.ReplaceAll(hq.notifyJobs, "= ANY ($1::text[])", "IN ("+q(justEnded)+" AND mode <> 'unit')")
	buildTreeHoldQueries(&hq, q, justEnded)
	hq.treeRelease = treeReleaseSQL(&hq, q)
	// The end of job attempts (jobs_beyond.go): the holds of the attempts ($1 ids, $2 tokens) that
	// the statements before them in the batch ended (the job is no longer running with that
	// token), ended at the instant setNow kept; then, by their lease IDs ($1), their keys'
	// summary rows, the wakes of their lines and of their keys' jobs.
	jobHolds := `(SELECT E'\x1fjob:' || r.id, r.token FROM unnest($1::bigint[], $2::bigint[]) AS r (id, token)
	WHERE NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.id = r.id AND j.token = r.token AND j.state = 'running'))`
	hq.lockJobHolds = q(lockTreeSQL(`ARRAY(SELECT h.key FROM {holds} h
	WHERE (h.lease_id, h.token) IN ` + jobHolds + ` AND h.ended = 0 AND h.mode <> 'unit')`))
	hq.endJobHolds = q(`UPDATE {holds} SET ended = 1, expires_at = least(expires_at, ` + nowSetting + `)
WHERE (lease_id, token) IN ` + jobHolds + ` AND ended = 0 AND expires_at > ` + nowSetting)
	byIDs := strings.NewReplacer("lease_id = $1 AND lease_key = $2 AND owner = $3", "lease_id = ANY ($1::text[])",
		"e.lease_id = $1 AND e.lease_key = $2 AND e.owner = $3", "e.lease_id = ANY ($1::text[])")
	hq.settleJobEnded = byIDs.Replace(hq.settleEnded)
	hq.wakeJobEnded = byIDs.Replace(hq.wakeEnded)
	hq.notifyJobsJobEnded = byIDs.Replace(hq.notifyJobsEnded)
	hq.wakeRelatedJobEnded = byIDs.Replace(hq.wakeRelatedEnded)
	hq.notifyRelatedJobEnded = byIDs.Replace(hq.notifyRelatedEnded)
	hq.reacquireAt = nowOr(hq.reacquire, 4)
	hq.placeAt = nowOr(hq.place, 2)
	hq.keyLineAt = nowOr(hq.keyLine, 3, 5, 8)
	hq.limitUseAt = nowOr(hq.limitUse, 3, 5)
	return hq
}

// othersWaitSQL: a live ticket (at now) of another request than lease ID leaseID waits in
// key's line.
func othersWaitSQL(key, leaseID, now string) string {
	return `EXISTS (SELECT 1 FROM {tickets} w WHERE w.key = ` + key + ` AND w.lease_id <> ` + leaseID + ` AND w.expires_at > ` + now + `)`
}

// holdTx runs fn in one transaction, again (up to a few times) if the database broke a deadlock
// by aborting it: a force-release of a key ends the holds of every lease on it and settles their
// other keys, locking their rows after the key's own.
func (s *Store) holdTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		var pgErr *pgconn.PgError
		if attempt < 5 && errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") {
			continue
		}
		return err
	}
}

// passThrough reports whether err is an answer of the store rather than a failure.
func passThrough(err error) bool {
	var invalid *store.InvalidArgumentError
	return errors.As(err, &invalid) || errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrLimitInUse)
}

// holdErr wraps a failure of op; the store's answers pass as they are.
func (s *Store) holdErr(op, key string, err error) error {
	if err == nil || passThrough(err) {
		return err
	}
	return s.fail(op, key, err)
}

// keyRow is a key's leases row, as locked.
type keyRow struct {
	leaseID, holder        string
	token                  int64
	expiresAt, availableAt time.Time
	ended                  int16
	jobID                  int64
}

// lockKeys locks the leases rows of keys in key order and reads the database's clock after. It
// returns the rows found (a key without one is missing) and that instant.
func (s *Store) lockKeys(ctx context.Context, tx txQuerier, keys []string) (map[string]*keyRow, time.Time, error) {
	rows, err := tx.Query(ctx, s.hq.lockRows, keys)
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make(map[string]*keyRow, len(keys))
	for rows.Next() {
		var k string
		r := &keyRow{}
		if err := rows.Scan(&k, &r.leaseID, &r.holder, &r.token, &r.expiresAt, &r.availableAt, &r.ended, &r.jobID); err != nil {
			rows.Close()
			return nil, time.Time{}, err
		}
		out[k] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, err
	}
	var now time.Time
	err = tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return out, now, err
}

// errUnmarked: a key of the request has no leases row yet.
var errUnmarked = errors.New("postgres: a key of the request is not a lock key yet")

// place is a request's place in its lines: the arrival and sequence its live tickets share, or
// none (a newcomer, behind every live ticket).
type place struct {
	at  time.Time
	seq int64
	has bool
}

// acquireBeyond grants a request that Beyond reports, or refuses it (enqueuing its tickets if it
// waits), in one transaction of three batches (holds_pipe.go): the locks and the clock; the
// reads; the writes with COMMIT.
func (s *Store) acquireBeyond(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if p.First {
		rule := "cannot be combined with shared mode, resources or limits"
		if !p.Beyond() {
			// A key of a tree (trees.go), whose grants go through holds.
			rule = "is not supported on a key of a tree by the PostgreSQL store"
		}
		return nil, &store.InvalidArgumentError{Field: "first", Rule: rule}
	}
	var md any // NULL for no metadata
	if len(p.Metadata) > 0 {
		md = string(p.Metadata)
	}
	for attempt := 0; ; attempt++ {
		var (
			lease   *store.Lease
			refusal error
			missing []string
			woken   []string
		)
		err := s.pipeGrant(ctx, p.Key, func(pt *pipeTx) (err error) {
			lease, refusal, missing, woken, err = s.beyondTx(ctx, pt, p, md, nil)
			return err
		})
		if errors.Is(err, errUnmarked) && attempt < acquireAttempts {
			// Make the keys lock keys (resource_line.go), then take their rows.
			for _, k := range missing {
				if err := s.markLockKey(ctx, k); err != nil {
					return nil, s.fail("acquire", p.Key, err)
				}
			}
			continue
		}
		if err != nil {
			var pgErr *pgconn.PgError
			// Class 22 is a data exception: valid JSON that jsonb cannot hold (see Acquire).
			if md != nil && errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22" {
				return nil, &store.InvalidArgumentError{Field: "metadata",
					Rule: "must be storable as PostgreSQL jsonb (" + pgErr.Message + ")"}
			}
			return nil, s.holdErr("acquire", p.Key, err)
		}
		s.wakePayloads(woken)
		if refusal != nil {
			return nil, refusal
		}
		return lease, nil
	}
}

// beyondJob is what a job's attempt adds to the transaction of a grant beyond one key
// (claimHolds): its place in every line is its submit (arrival), it never renews another lease of
// its holder, its row is locked first (pre, read by preRead), and its grant is written before the
// commit (granted, which commits).
type beyondJob struct {
	arrival time.Time
	pre     func(b *pgx.Batch)
	preRead func(br pgx.BatchResults) error
	granted func(pt *pipeTx, l *store.Lease, now time.Time) error
}

// beyondTx is the transaction of acquireBeyond (and, with job, of a job's claim) on pt: it grants
// p, or refuses it (enqueuing or refreshing its tickets if it waits), and commits; or it fails with
// errUnmarked, naming the keys without a leases row (missing).
func (s *Store) beyondTx(ctx context.Context, pt *pipeTx, p *store.AcquireParams, md any, job *beyondJob) (
	lease *store.Lease, refusal error, missing, woken []string, err error) {
	keys := p.Keys()
	sortedLimits := slices.Sorted(slices.Values(p.Limits))
	// The keys this process believes in trees: their related keys are read in the first batch.
	hinted := map[string]string{}
	for _, k := range keys {
		if prefix := s.trees.Of(k); prefix != "" {
			hinted[k] = prefix
		}
	}
	// The locks: the keys' rows in key order, then the limits' rows in name order, then
	// the clock; then, in a fresh snapshot after them, the reads (at the clock's instant,
	// which the session keeps: setNow). The lines are read as for a newcomer, and again
	// if the caller has its place in them; a job's, at its place (its submit).
	var (
		lt          *lockedTree
		related     map[string]*relatedRead
		caps        map[string]int
		now         time.Time
		reacquireID string
		me          place
		keyLines    []keyLineRead
		limitUses   []limitUseRead
		rates       []store.ScopedRate
	)
	linePlace := place{}
	if job != nil {
		linePlace = place{at: job.arrival, has: true}
	}
	err = pt.batch(ctx, func(b *pgx.Batch) {
		if job != nil {
			job.pre(b)
		}
		b.Queue(s.hq.lockTree, keys)
		if len(sortedLimits) > 0 {
			b.Queue(s.hq.lockLimits, sortedLimits)
		}
		b.Queue(setNow)
		if job == nil {
			b.Queue(s.hq.reacquireAt, p.Key, p.Holder, p.Owner, nil)
		}
		b.Queue(s.hq.placeAt, p.LeaseID, nil, p.Lines())
		s.queueLines(b, p, nil, linePlace)
		s.queueRelated(b, p, hinted, nil, linePlace)
		// The rates of its limits and of the rated prefixes of its keys (rates_scoped.go).
		b.Queue(s.jq.scoped.rates, keys, append([]string{}, p.Limits...))
	}, false, func(br pgx.BatchResults) error {
		if job != nil {
			if err := job.preRead(br); err != nil {
				return err
			}
		}
		r, err := br.Query()
		if err != nil {
			return err
		}
		if lt, err = scanLockTree(r); err != nil {
			return err
		}
		if len(sortedLimits) > 0 {
			if r, err = br.Query(); err != nil {
				return err
			}
			if caps, err = scanCaps(r, len(sortedLimits)); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&now); err != nil {
			return err
		}
		if job == nil {
			if err := br.QueryRow().Scan(&reacquireID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if r, err = br.Query(); err != nil {
			return err
		}
		if me, err = scanPlace(r, len(p.Lines())); err != nil {
			return err
		}
		if keyLines, limitUses, err = readLines(br, p); err != nil {
			return err
		}
		if related, err = readRelated(br, p, hinted); err != nil {
			return err
		}
		rates, err = scanScoped(br.QueryRow())
		return err
	})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	rows := lt.rows
	if err := validateTreeKeys(p, lt.prefixes); err != nil {
		return nil, nil, nil, nil, err
	}
	if len(lt.missing) > 0 {
		return nil, nil, lt.missing, nil, errUnmarked
	}
	stale := false
	for _, k := range keys {
		stale = stale || hinted[k] != lt.prefixes[k]
	}
	if stale {
		// Another process set or deleted a tree: read the related keys by the trees this
		// transaction read (it holds them until it commits), and the trees again after.
		defer func() { _ = s.loadTrees(context.WithoutCancel(ctx)) }()
	}
	for _, name := range sortedLimits {
		if _, ok := caps[name]; !ok {
			return nil, nil, nil, nil, store.UnknownLimit(name)
		}
	}
	if reacquireID != "" {
		lease, err = s.renewHoldsTx(ctx, pt.conn, &store.RenewParams{Key: p.Key, LeaseID: reacquireID, Owner: p.Owner, TTL: p.TTL}, now, true)
		return lease, nil, nil, nil, err
	}
	if me.has && job == nil || stale {
		at := linePlace
		if me.has && job == nil {
			at = me
		}
		err = pt.batch(ctx, func(b *pgx.Batch) {
			s.queueLines(b, p, &now, at)
			s.queueRelated(b, p, lt.prefixes, &now, at)
		}, false, func(br pgx.BatchResults) (err error) {
			if keyLines, limitUses, err = readLines(br, p); err != nil {
				return err
			}
			related, err = readRelated(br, p, lt.prefixes)
			return err
		})
		if err != nil {
			return nil, nil, nil, nil, err
		}
	}
	for i, k := range keys {
		if refusal = keyRefusal(p, k, rows[k], now, keyLines[i].sum, keyLines[i]); refusal != nil {
			break
		}
		if r := related[k]; r != nil {
			if refusal = relatedRefusal(p, k, now, r); refusal != nil {
				break
			}
		}
	}
	for i := 0; refusal == nil && i < len(p.Limits); i++ {
		refusal = limitRefusal(p, p.Limits[i], caps[p.Limits[i]], now, limitUses[i])
	}
	if refusal == nil && len(rates) > 0 {
		// Nothing else refuses it: the rates it counts in, under their locks.
		w, err := s.checkScoped(ctx, pt, rates, now)
		switch {
		case err != nil:
			return nil, nil, nil, nil, err
		case w != nil && job != nil:
			// A job stays its resource's head until the window frees (claimHoldsJob).
			return nil, nil, nil, nil, &rateReachedError{next: w.Next}
		case w != nil:
			refusal = store.RateRefusal(p.Key, *w, now)
		}
	}
	switch {
	case refusal != nil && job != nil:
		return nil, refusal, nil, nil, s.enqueueJob(ctx, pt, p, now, me, job.arrival)
	case refusal != nil && p.Wait:
		return nil, refusal, nil, nil, s.enqueueBeyond(ctx, pt, p, now, me)
	case refusal != nil:
		return nil, refusal, nil, nil, nil
	}
	if len(rates) > 0 {
		if err := s.recordScoped(ctx, pt, rates, now); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	lease, woken, err = s.grantBeyond(ctx, pt, p, now, md, job == nil)
	if err == nil && job != nil {
		err = job.granted(pt, lease, now)
	}
	return lease, nil, nil, woken, err
}

// enqueueJob keeps a refused job's tickets alive in every line of its request (me: it has them
// all), or puts them there again at its submit (arrival), for the claim TTL from now: lock
// requests that arrive later wait behind it. Its tickets name the job (store.JobHolder) and no
// owner, and are refreshed whoever claims it; and commits.
func (s *Store) enqueueJob(ctx context.Context, pt *pipeTx, p *store.AcquireParams, now time.Time, me place, arrival time.Time) error {
	holder := p.Holder
	if id, ok := store.JobOfLeaseID(p.LeaseID); ok {
		holder = store.JobHolder(id) // the tickets are the job's, whichever worker tried it
	}
	expires := expiry(now, p.TTL)
	return s.enqueueLines(ctx, pt, p, now, me, holder, "", arrival, s.hq.refreshJob, expires, p.LeaseID, p.Lines())
}

// holdSummary is the hold that refuses a request on a key held by holds (read by keyLine).
type holdSummary struct {
	mode, holder string
	token        int64
	expires      time.Time
}

// keyLineRead is what keyLine reads of a key's line.
type keyLineRead struct {
	ahead int
	front *string
	job   *int64
	sum   *holdSummary
}

// limitUseRead is what limitUse reads of a limit.
type limitUseRead struct {
	inUse, ahead int
	soonest      *time.Time
	holder       *string
}

// queueLines queues keyLine for each key of p and limitUse for each of its limits, for a caller
// at place me, at now (nil: the instant setNow kept).
func (s *Store) queueLines(b *pgx.Batch, p *store.AcquireParams, now *time.Time, me place) {
	arrival := now
	if me.has {
		arrival = &me.at
	}
	for _, k := range p.Keys() {
		b.Queue(s.hq.keyLineAt, k, p.LeaseID, now, me.has, arrival, me.seq, p.Shared, arrival)
	}
	for _, name := range p.Limits {
		b.Queue(s.hq.limitUseAt, store.LimitLine(name), p.LeaseID, now, me.has, arrival, me.seq)
	}
}

// readLines reads the results of queueLines.
func readLines(br pgx.BatchResults, p *store.AcquireParams) ([]keyLineRead, []limitUseRead, error) {
	keys := p.Keys()
	kl := make([]keyLineRead, len(keys))
	for i := range keys {
		var mode, holder *string
		var token *int64
		var expires *time.Time
		if err := br.QueryRow().Scan(&kl[i].ahead, &kl[i].front, &kl[i].job, &mode, &holder, &token, &expires); err != nil {
			return nil, nil, err
		}
		if mode != nil {
			kl[i].sum = &holdSummary{mode: *mode, holder: *holder, token: *token, expires: *expires}
		}
	}
	lu := make([]limitUseRead, len(p.Limits))
	for i := range p.Limits {
		if err := br.QueryRow().Scan(&lu[i].inUse, &lu[i].soonest, &lu[i].holder, &lu[i].ahead); err != nil {
			return nil, nil, err
		}
	}
	return kl, lu, nil
}

// keyRefusal says why key k (its locked row r) cannot be granted to p now: a lease, a job
// attempt or an exclusive hold holds it (or, for an exclusive request, any hold), it rests, or a
// ticket or ready job before the caller waits in its line. nil if it can be granted. sum is the
// hold keyLine read (nil if none), line what keyLine read.
func keyRefusal(p *store.AcquireParams, k string, r *keyRow, now time.Time, sum *holdSummary, line keyLineRead) error {
	resource := ""
	if k != p.Key {
		resource = k
	}
	live := r.ended == 0 && r.expiresAt.After(now)
	switch {
	case !r.availableAt.After(now):
	case live && (r.leaseID != "" || r.jobID != 0):
		// A lease, or a job attempt's gate (holder job:<id>).
		return &store.LockHeldError{Key: p.Key, Resource: resource, Holder: r.holder, Token: uint64(r.token),
			ExpiresAt: r.expiresAt, RetryAfter: r.expiresAt.Sub(now)}
	case live:
		// Holds: compatible only if all are shared and so is the request.
		if sum == nil {
			return restOf(k, r, now)
		}
		if sum.mode == "exclusive" || !p.Shared {
			return &store.LockHeldError{Key: p.Key, Resource: resource, Holder: sum.holder, Token: uint64(sum.token),
				Shared: sum.mode == "shared", ExpiresAt: sum.expires, RetryAfter: sum.expires.Sub(now)}
		}
	default:
		return restOf(k, r, now)
	}
	// The line: an exclusive request waits for every ticket before it, a shared one for the
	// exclusive ones; both for the ready head job submitted before them (jobs hold their resource
	// exclusive).
	ahead := line.ahead
	if line.job != nil {
		ahead++
	}
	if ahead == 0 {
		return nil
	}
	e := &store.LockHeldError{Key: p.Key, Resource: resource, Ahead: ahead}
	switch {
	case line.job != nil:
		e.Holder = store.JobHolder(*line.job)
	case line.front != nil:
		e.Holder = *line.front
	}
	return e
}

// restOf is the rest of a key whose row r is not available at now.
func restOf(k string, r *keyRow, now time.Time) error {
	reason := store.ReasonLockDelay
	switch r.ended {
	case 1:
		reason = store.ReasonCooldown
	case 3:
		reason = store.ReasonResourceCooldown
	}
	return &store.RestingError{Key: k, Reason: reason, Remaining: r.availableAt.Sub(now)}
}

// limitRefusal says why limit name (of capacity c) cannot grant p a unit now: its units in use
// plus the live tickets before the caller in its line reach c. nil if it can. u is what limitUse
// read.
func limitRefusal(p *store.AcquireParams, name string, c int, now time.Time, u limitUseRead) error {
	if u.inUse+u.ahead < c {
		return nil
	}
	e := &store.LockHeldError{Key: p.Key, Limit: name, InUse: u.inUse, Capacity: c, Ahead: u.ahead}
	if u.holder != nil {
		e.Holder = *u.holder
	}
	if u.soonest != nil {
		e.ExpiresAt = *u.soonest
		e.RetryAfter = u.soonest.Sub(now)
	}
	return e
}

// enqueueBeyond puts a refused waiter in every line of its request with one arrival, or keeps its
// tickets alive if it has its place in all of them, and marks the plain leases that hold its keys
// so that their releases wake the lines' fronts; and commits.
func (s *Store) enqueueBeyond(ctx context.Context, pt *pipeTx, p *store.AcquireParams, now time.Time, me place) error {
	ls := p.Lines()
	expires := expiry(now, p.TTL)
	return s.enqueueLines(ctx, pt, p, now, me, p.Holder, p.Owner, now, s.hq.refresh, expires, p.LeaseID, p.Owner, ls)
}

// enqueueLines marks the plain leases that hold p's keys (their releases wake the lines'
// fronts), then keeps p's tickets alive with the statement refresh (and its arguments) if it has
// its place (me), or puts them in every line of p at arrival for holder and owner; and commits.
func (s *Store) enqueueLines(ctx context.Context, pt *pipeTx, p *store.AcquireParams, now time.Time, me place,
	holder, owner string, arrival time.Time, refresh string, refreshArgs ...any) error {
	ls := p.Lines()
	expires := expiry(now, p.TTL)
	return pt.batch(ctx, func(b *pgx.Batch) {
		b.Queue(s.hq.markWaiters, p.Keys(), now)
		if me.has {
			b.Queue(refresh, refreshArgs...)
			return
		}
		b.Queue(s.hq.dropTickets, p.LeaseID, ls)
		b.Queue(s.hq.enqueue, ls, p.LeaseID, holder, owner, arrival, expires, p.HoldMode(), p.Key)
	}, true, func(br pgx.BatchResults) error {
		n := 2
		if me.has {
			n = 1
		}
		for range n + 1 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
}

// grantBeyond grants every key and limit unit of the request under one token, ends its tickets,
// wakes the new fronts of the lines that may let others go too, and commits if commit. It returns the lease
// and the payloads NOTIFYed.
func (s *Store) grantBeyond(ctx context.Context, pt *pipeTx, p *store.AcquireParams, now time.Time, md any, commit bool) (*store.Lease, []string, error) {
	expires := expiry(now, p.TTL)
	keys := p.Keys()
	held, modes := p.Lines(), make([]string, 0, len(keys)+len(p.Limits))
	for range keys {
		modes = append(modes, p.HoldMode())
	}
	for range p.Limits {
		modes = append(modes, "unit")
	}
	// The next in a limit's line, or a shared request behind a shared one, may go too: wake the
	// new fronts. Each that cannot go waits again.
	var wake []string
	for _, name := range p.Limits {
		wake = append(wake, store.LimitLine(name))
	}
	if p.Shared {
		wake = append(wake, keys...)
	}
	var token int64
	var woken []string
	var slots map[string]int
	err := pt.batch(ctx, func(b *pgx.Batch) {
		b.Queue(s.hq.grantHoldsCur, p.LeaseID, p.Key, p.Holder, p.Owner, now, expires,
			p.Cooldown.Milliseconds(), p.LockDelay.Milliseconds(), md, held, modes)
		b.Queue(s.hq.grantRowsCur, keys, p.Holder, p.Owner, now, expires, p.LockDelay.Milliseconds(),
			p.Cooldown.Milliseconds(), len(keys), p.LeaseID)
		b.Queue(s.hq.dropTickets, p.LeaseID, held)
		if len(wake) > 0 {
			b.Queue(s.hq.wake, wake, now, false)
		}
	}, commit, func(br pgx.BatchResults) error {
		var n int
		var names []string
		var nums []int32
		if err := br.QueryRow().Scan(&token, &n, &names, &nums); err != nil {
			return err
		}
		for i, name := range names {
			if slots == nil {
				slots = make(map[string]int, len(names))
			}
			slots[name] = int(nums[i])
		}
		var zero int
		if err := br.QueryRow().Scan(&zero); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		if len(wake) > 0 {
			r, err := br.Query()
			if err != nil {
				return err
			}
			woken, err = scanWoken(r)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Owner: p.Owner, Token: uint64(token),
		AcquiredAt: now, ExpiresAt: expires, TTLLeft: p.TTL, Metadata: p.Metadata,
		Shared: p.Shared, Resources: p.Resources, Limits: p.Limits, Slots: slots}, woken, nil
}

// expiry is now+ttl as the database keeps it (microseconds), never later: the holder must not
// believe in a lease longer than the store's.
func expiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Microsecond)
}

// renewHoldsTx extends every hold of the lease (Key, LeaseID) of p.Owner by p.TTL from now, and
// its keys' summary rows with them; ErrNotHeld if it has none live. Unless locked, it first locks
// the rows of the lease's keys in key order.
func (s *Store) renewHoldsTx(ctx context.Context, tx txQuerier, p *store.RenewParams, now time.Time, locked bool) (*store.Lease, error) {
	if !locked {
		var err error
		if now, err = s.lockKeysOf(ctx, tx, p.LeaseID, p.Key, p.Owner); err != nil {
			return nil, err
		}
	}
	expires := expiry(now, p.TTL)
	rows, err := tx.Query(ctx, s.hq.renewHolds, p.LeaseID, p.Key, p.Owner, expires, now)
	if err != nil {
		return nil, err
	}
	l := &store.Lease{Key: p.Key, ID: p.LeaseID, Owner: p.Owner, ExpiresAt: expires, TTLLeft: p.TTL}
	var keys []string
	found := false
	for rows.Next() {
		var key, mode string
		var token int64
		var md []byte
		var slot *int32
		if err := rows.Scan(&key, &mode, &l.Holder, &token, &l.AcquiredAt, &md, &slot); err != nil {
			rows.Close()
			return nil, err
		}
		found = true
		l.Token = uint64(token)
		n := 0
		if slot != nil {
			n = int(*slot)
		}
		l.AddHold(key, mode, n, md)
		if mode != "unit" {
			keys = append(keys, key)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, store.ErrNotHeld
	}
	l.SortHolds()
	_, err = tx.Exec(ctx, s.hq.renewRows, expires, keys)
	return l, err
}

// lockKeysOf locks the rows of the keys of the lease (leaseID, leaseKey, owner) in key order and
// returns the database's clock after.
func (s *Store) lockKeysOf(ctx context.Context, tx txQuerier, leaseID, leaseKey, owner string) (time.Time, error) {
	rows, err := tx.Query(ctx, s.hq.keysOf, leaseID, leaseKey, owner)
	if err != nil {
		return time.Time{}, err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return time.Time{}, err
	}
	slices.Sort(keys)
	_, now, err := s.lockKeys(ctx, tx, keys)
	return now, err
}

// renewHolds renews a lease made of holds.
func (s *Store) renewHolds(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	var l *store.Lease
	err := s.holdTx(ctx, func(tx pgx.Tx) (err error) {
		l, err = s.renewHoldsTx(ctx, tx, p, time.Time{}, false)
		return err
	})
	if err != nil {
		return nil, s.holdErr("renew", p.Key, err)
	}
	return l, nil
}

// releaseHolds ends a lease made of holds and frees or shrinks its keys' summary rows; the
// fronts of the lines of its keys and limits, and of the lines related to its keys in trees, are
// woken when it commits. It runs as one batch (holds_pipe.go): the locks (its keys' rows, and
// their ancestors' in trees, as its grant took them: lockTreeSQL) and the clock, the end of the
// holds, the summary rows and the wakes of what they ended, COMMIT. A lease on a key of a tree
// runs the same locks and one statement that does the rest (releaseTreeOne).
func (s *Store) releaseHolds(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if s.trees.Of(p.Key) != "" {
		return s.releaseTreeOne(ctx, p)
	}
	var res *store.ReleaseResult
	var woken []string
	err := s.pipeRun(ctx, func(pt *pipeTx) error {
		res, woken = nil, nil
		var (
			now, acquired time.Time
			n, released   int
		)
		err := pt.batch(ctx, func(b *pgx.Batch) {
			b.Queue(s.hq.lockTreeOf, p.LeaseID, p.Key, p.Owner)
			b.Queue(setNow)
			b.Queue(s.hq.endHoldsNow, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.settleEnded, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.wakeEnded, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.notifyJobsEnded, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.wakeRelatedEnded, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.notifyRelatedEnded, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.countEnded, p.LeaseID, p.Key, p.Owner)
		}, true, func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return err
			}
			if err := br.QueryRow().Scan(&now); err != nil {
				return err
			}
			rows, err := br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
				var key, mode string
				var cooldown int64
				if err := rows.Scan(&key, &mode, &acquired, &cooldown); err != nil {
					rows.Close()
					return err
				}
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if _, err := br.Exec(); err != nil {
				return err
			}
			if rows, err = br.Query(); err != nil {
				return err
			}
			if woken, err = scanWoken(rows); err != nil {
				return err
			}
			if _, err := br.Exec(); err != nil {
				return err
			}
			if rows, err = br.Query(); err != nil {
				return err
			}
			related, err := scanWoken(rows)
			if err != nil {
				return err
			}
			woken = append(woken, related...)
			if _, err := br.Exec(); err != nil {
				return err
			}
			return br.QueryRow().Scan(&released)
		})
		switch {
		case err != nil:
			return err
		case n > 0:
			res = &store.ReleaseResult{Held: now.Sub(acquired)}
		case released == 0:
			// Nothing was written.
			return store.ErrNotHeld
		default:
			res = &store.ReleaseResult{AlreadyReleased: true}
		}
		return nil
	})
	if err != nil {
		return nil, s.holdErr("release", p.Key, err)
	}
	s.wakePayloads(woken)
	return res, nil
}

// endHoldsOf force-ends every live lease made of holds that holds key (an admin's force-release
// of it), and settles its other keys; key's own row was ended by the caller. It NOTIFYs the fronts
// of the lines of everything they held, and of the lines related to them in trees, and returns
// the payloads to wake in this process.
func (s *Store) endHoldsOf(ctx context.Context, tx pgx.Tx, key string) ([]string, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, s.hq.forceEndHolds, key, now)
	if err != nil {
		return nil, err
	}
	ls := []string{key}
	var settle []string
	for rows.Next() {
		var k, mode string
		if err := rows.Scan(&k, &mode); err != nil {
			rows.Close()
			return nil, err
		}
		if !slices.Contains(ls, k) {
			ls = append(ls, k)
			if mode != "unit" {
				settle = append(settle, k)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(settle)
	if _, _, err := s.lockKeys(ctx, tx, settle); err != nil {
		return nil, err
	}
	for _, k := range settle {
		if _, err := tx.Exec(ctx, s.hq.settle, k, now, 0); err != nil {
			return nil, err
		}
	}
	woken, err := s.wakeLines(ctx, tx, ls, now, true)
	if err != nil {
		return nil, err
	}
	// The lines related to the keys in trees. The force-release took no lock on their
	// ancestors: a request that read a key held just before may wait for its poll.
	rows, err = tx.Query(ctx, s.hq.wakeRelated, ls, now)
	if err != nil {
		return nil, err
	}
	related, err := scanWoken(rows)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, s.hq.notifyRelated, ls, now); err != nil {
		return nil, err
	}
	return append(woken, related...), nil
}

// wakeLines NOTIFYs, when the transaction commits, the waiters that may go now in each line of
// ls: the front ticket's (by the key it waits by, and its lease ID), and the shared tickets right
// behind a shared front. After a release (released), also one waiter of each key whose line has
// no ticket, and the workers of the keys' ready head jobs. It returns the payloads, for this
// process's waiters.
func (s *Store) wakeLines(ctx context.Context, tx pgx.Tx, ls []string, now time.Time, released bool) ([]string, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, s.hq.fronts, ls, now)
	if err != nil {
		return nil, err
	}
	var payloads []string
	seen := map[string]bool{} // lines with a ticket
	var line string
	stop := false // the rest of line's tickets wait
	for rows.Next() {
		var l, payload, mode string
		if err := rows.Scan(&l, &payload, &mode); err != nil {
			rows.Close()
			return nil, err
		}
		if l != line {
			line, stop = l, false
			seen[l] = true
			payloads = append(payloads, payload)
			stop = mode != "shared"
			continue
		}
		if stop || mode != "shared" {
			stop = true
			continue
		}
		payloads = append(payloads, payload)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var keys []string
	for _, l := range ls {
		if strings.HasPrefix(l, "\x1e") {
			continue
		}
		keys = append(keys, l)
		if released && !seen[l] {
			payloads = append(payloads, l)
		}
	}
	if len(payloads) > 0 {
		if _, err := tx.Exec(ctx, s.hq.notify, payloads); err != nil {
			return nil, err
		}
	}
	if released && len(keys) > 0 {
		if _, err := tx.Exec(ctx, s.hq.notifyJobs, keys); err != nil {
			return nil, err
		}
	}
	return payloads, nil
}

// wakePayloads wakes this process's waiters named by NOTIFY payloads that committed (the
// listener delivers them too, a little later).
func (s *Store) wakePayloads(payloads []string) {
	for _, p := range payloads {
		wakeFromPayload(s.hub, p)
	}
}
