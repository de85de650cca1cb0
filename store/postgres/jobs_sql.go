package postgres

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// jobQueries holds the job statements of one schema, built once at open. Only schema-qualified
// names (validated, then sanitized) are spliced in; every user value is a bind parameter.
type jobQueries struct {
	kindGet, kindUpsert, kindList        string
	unknownLimit                         string
	existing, lockResource, busy, insert string
	joinsShared                          string
	get                                  string
	// list is ListJobs' statement for each set of filters and state (see listJobsSQL).
	list map[listKey]string
	// resourceListBounded is resourceList with the end of the prefix's range ($4).
	resourceListBounded                                                string
	claim, claimRated, markWaiting, lockRejected, promoteRejected      string
	holdsHeads, lockHoldsJob, lockResourceState, startHolds            string
	setRunningState, rejectHolds                                       string
	lockHoldsRunning, heartbeatHolds, dropJobTickets, discardJob       string
	heartbeat, finish, lockFinished, promoteFinished                   string
	completeMany, promoteMany                                          string
	lockJob, setCancel, cancel, retryFinal, retryNow, purge            string
	reapCandidates, clean, counts                                      string
	resourceGet, resourceList, resourceSet, resourceVersion, notifyAny string
	lockReplaced, lockReplacedNowait, askRunningToStop, supersede      string
	rates                                                              rateQueries
	scoped                                                             scopedQueries // rates_scoped.go
	askRunningToStopNowait, supersedeNowait                            string
}

// jobCols is what every job-returning statement yields, in scanJob's order.
const jobCols = `j.id, j.seq, j.kind, j.resource, j.args, j.state, j.attempt, j.max_attempts, j.priority,
	coalesce(j.idempotency_key, ''), j.errors, j.created_at, j.scheduled_at, j.attempted_at, j.finished_at,
	j.head, j.worker, j.token, j.lease_expires_at, j.cancel_requested, j.timeout_ms, j.owner,
	j.shared, j.resources, j.limits, j.tree, j.superseded_by, j.holds, j.traceparent`

const unfinished = `('scheduled', 'available', 'running', 'retryable')`

// promote makes the oldest unfinished job of each resource in {set} its head, if it is not
// already, and, if that job holds the resource shared, the shared jobs directly behind it (a
// resource's heads: its oldest unfinished job, and the shared jobs behind a shared one; while the
// oldest is head, the heads are left as they are, so a shared head that ended leaves the others
// heads). It raises each new head's scheduled_at to its kind's cooldown and the resource's cooldown (a job
// queued before that began starts after it), and NOTIFYs workers
// of its kind that may be waiting. It must run in a statement AFTER the one that locked those
// resources' rows, so that its snapshot sees every submit that committed before the lock.
//
// The next job of each resource is read with LIMIT 1 off the jobs_unfinished_by_resource index,
// in queue order (the shared jobs behind it only if it is a shared job that was not head): a DISTINCT ON over the resources' unfinished jobs read them all, 1.3 ms per
// promotion on a resource with 2,000 jobs queued.
//
// The update finds each new head by its key in that index (resource, seq, with the index's
// predicate) as well as by its id, so that even a generic plan made while the table was nearly
// empty reads no table whole (joined by id alone, such a plan scanned the jobs table).
const promote = `WITH nxt AS (
	SELECT x.id, rs.resource, x.seq
	FROM (SELECT DISTINCT s.resource FROM ({set}) s) rs CROSS JOIN LATERAL (
		SELECT u.id, u.seq, u.head, u.shared FROM {jobs} u
		WHERE u.resource = rs.resource AND u.state IN ` + unfinished + `
		ORDER BY u.seq
		LIMIT 1
	) f CROSS JOIN LATERAL (
		SELECT f.id, f.seq
		UNION ALL
		SELECT v.id, v.seq FROM {jobs} v
		WHERE f.shared AND NOT f.head AND v.resource = rs.resource AND v.state IN ` + unfinished + ` AND v.seq > f.seq
			AND v.seq < coalesce((SELECT w.seq FROM {jobs} w WHERE w.resource = rs.resource AND w.state IN ` + unfinished + `
				AND w.seq > f.seq AND NOT w.shared ORDER BY w.seq LIMIT 1), 9223372036854775807)
	) x
), p AS (
	UPDATE {jobs} j SET head = true,
		scheduled_at = greatest(j.scheduled_at, coalesce((r.cooldowns ->> j.kind)::timestamptz, '-infinity'),
			coalesce(r.cooldown_until, '-infinity'))
	FROM nxt, {resources} r
	WHERE j.id = nxt.id AND j.resource = nxt.resource AND j.seq = nxt.seq AND j.state IN ` + unfinished + `
		AND NOT j.head AND r.key = j.resource
	RETURNING j.kind, j.scheduled_at
)
SELECT count(*)::int FROM (
	SELECT pg_notify({channel}, {jobkey} || p.kind)
	FROM p JOIN {kinds} k ON k.name = p.kind
	WHERE k.waiting_until > now() AND p.scheduled_at <= now()
) n`

func buildJobQueries(schema, channel string) jobQueries {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// The schema is [a-z0-9_] and the channel derives from it, so neither can hold a quote.
	r := strings.NewReplacer(
		"{jobs}", id("jobs"), "{resources}", id("resources"), "{kinds}", id("job_kinds"),
		"{leases}", id("leases"), "{tickets}", id("tickets"), "{holds}", id("holds"), "{limits}", id("limits"), "{rate_grants}", id("rate_grants"), "{rate_prefixes}", id("rate_prefixes"), "{events}", id("events"), "{leasesname}", "'"+id("leases")+"'", "{token_seq}", "'"+id("token_seq")+"'", "{job_seq}", "'"+id("job_seq")+"'",
		"{channel}", "'"+channel+"'", "{jobkey}", "E'\\x1fjob:'",
	)
	q := func(s string) string { return r.Replace(s) }
	return jobQueries{
		kindGet: q(`SELECT name, policy, max_attempts, timeout_ms, cooldown_ms, from_states, running_state,
	success_state, failure_state, resource_cooldown_ms, mode, limits, debounce_ms, rate_max, rate_window_ms FROM {kinds} WHERE name = $1`),
		kindList: q(`SELECT name, policy, max_attempts, timeout_ms, cooldown_ms, from_states, running_state,
	success_state, failure_state, resource_cooldown_ms, mode, limits, debounce_ms, rate_max, rate_window_ms FROM {kinds} ORDER BY name`),
		kindUpsert: q(`INSERT INTO {kinds} (name, policy, max_attempts, timeout_ms, cooldown_ms, from_states,
	running_state, success_state, failure_state, resource_cooldown_ms, mode, limits, debounce_ms, rate_max, rate_window_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (name) DO UPDATE SET policy = excluded.policy, max_attempts = excluded.max_attempts,
	timeout_ms = excluded.timeout_ms, cooldown_ms = excluded.cooldown_ms, from_states = excluded.from_states,
	running_state = excluded.running_state, success_state = excluded.success_state,
	failure_state = excluded.failure_state, resource_cooldown_ms = excluded.resource_cooldown_ms,
	mode = excluded.mode, limits = excluded.limits, debounce_ms = excluded.debounce_ms, rate_max = excluded.rate_max,
	rate_window_ms = excluded.rate_window_ms`),

		existing: q(`SELECT ` + jobCols + ` FROM {jobs} j WHERE j.idempotency_key = $1`),
		// The first of the limits $1 that does not exist.
		unknownLimit: q(`SELECT n FROM unnest($1::text[]) WITH ORDINALITY AS u (n, i)
WHERE NOT EXISTS (SELECT 1 FROM {limits} l WHERE l.name = u.n) ORDER BY i LIMIT 1`),
		// The no-op DO UPDATE locks an existing row, so submits to one resource (and the ends of
		// its jobs) decide its head one at a time.
		lockResource: q(`INSERT INTO {resources} AS r (key) VALUES ($1)
ON CONFLICT (key) DO UPDATE SET key = r.key
RETURNING (r.cooldowns ->> $2)::timestamptz, CASE WHEN r.cooldown_until > now() THEN r.cooldown_until END,
	r.cooldown_job, now()`),
		busy: q(`SELECT j.id, j.state FROM {jobs} j WHERE j.resource = $1 AND j.state IN ` + unfinished + `
ORDER BY j.seq LIMIT 1`),
		// Whether a shared job submitted now to resource $1 joins its heads: its newest
		// unfinished job is a shared head (so all of them are).
		joinsShared: q(`SELECT j.head AND j.shared FROM {jobs} j WHERE j.resource = $1 AND j.state IN ` + unfinished + `
ORDER BY j.seq DESC LIMIT 1`),
		// $1 kind, $2 resource, $3 args, $4 skipped, $5 head, $6 max attempts, $7 priority,
		// $8 idempotency key, $9 absolute time or null, $10 delay ms, $11 cooldown end, $12 errors,
		// $13 shared, $14 extra resources or null, $15 limits or null (store.ResolveHolds), $16 the
		// resource is a key of a tree (trees.go), $17 a key of the job is under a rated prefix
		// (rates_scoped.go): either is granted through holds. $18 the traceparent or ''.
		insert: q(`WITH v AS (
	SELECT CASE WHEN $5::bool THEN greatest(t.at, $11::timestamptz) ELSE t.at END AS at
	FROM (SELECT coalesce($9::timestamptz, now() + $10::bigint * interval '1 millisecond') AS at) t
)
INSERT INTO {jobs} AS j (seq, kind, resource, args, state, head, max_attempts, priority, idempotency_key,
	scheduled_at, finished_at, errors, shared, resources, limits, tree, holds, traceparent)
SELECT nextval({job_seq}), $1, $2, $3, CASE WHEN $4::bool THEN 'skipped' WHEN v.at > now() THEN 'scheduled'
	ELSE 'available' END, $5, $6, $7, nullif($8, ''), v.at, CASE WHEN $4::bool THEN now() END, $12,
	$13::bool, $14::text[], $15::text[], $16::bool,
	$13::bool OR $16::bool OR $17::bool OR coalesce(cardinality($14::text[]), 0) > 0 OR coalesce(cardinality($15::text[]), 0) > 0,
	nullif($18::text, '')
FROM v
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING ` + jobCols),
		notifyAny: q(`SELECT pg_notify({channel}, {jobkey} || k.name) FROM {kinds} k
WHERE k.name = $1 AND k.waiting_until > now()`),

		get:  q(`SELECT ` + jobCols + ` FROM {jobs} j WHERE j.id = $1`),
		list: listJobsStatements(q),

		rates:      buildRateQueries(q),
		scoped:     buildScopedQueries(q),
		claim:      q(claimSQL),
		claimRated: q(claimRatedSQL),
		// Jobs with holds (jobs_beyond.go). $1 kinds, $2 limit: the claimable heads with holds, in
		// claim order, with their kind's guard and timeout.
		holdsHeads: q(`SELECT j.from_states, j.running_state, j.kind_timeout_ms, j.rate_max, j.rate_window_ms, ` + jobCols + `
FROM unnest($1::text[]) AS kk (kind) CROSS JOIN LATERAL (
	SELECT j.*, k.from_states, k.running_state, k.timeout_ms AS kind_timeout_ms, k.rate_max, k.rate_window_ms FROM {jobs} j JOIN {kinds} k ON k.name = j.kind
	WHERE j.kind = kk.kind AND j.holds AND j.head AND j.state IN ('scheduled', 'available', 'retryable')
		AND j.scheduled_at <= now()
	ORDER BY j.priority, j.seq LIMIT $2
) j ORDER BY j.priority, j.seq LIMIT $2`),
		// $1 id: the job's attempt count, if it is still a claimable head with holds.
		lockHoldsJob: q(`SELECT j.attempt FROM {jobs} j WHERE j.id = $1 AND j.holds AND j.head
	AND j.state IN ('scheduled', 'available', 'retryable') AND j.scheduled_at <= now() FOR UPDATE SKIP LOCKED`),
		// $1 id, $2 token, $3 owner: the running attempt with holds, locked.
		lockHoldsRunning: q(`SELECT j.resource FROM {jobs} j WHERE j.id = $1 AND j.token = $2 AND j.owner = $3
	AND j.state = 'running' AND j.lease_expires_at > now() AND j.holds FOR UPDATE`),
		// $1 id, $2 the holds' new expiry.
		heartbeatHolds: q(`UPDATE {jobs} j SET lease_expires_at = $2 WHERE j.id = $1
RETURNING j.cancel_requested, (extract(epoch FROM j.lease_expires_at - now()) * 1000000)::bigint`),
		// $1 id, $2 code, $3 message: a head that can never run ends, discarded.
		discardJob: q(`UPDATE {jobs} j SET state = 'discarded', head = false, finished_at = now(),
	errors = j.errors || jsonb_build_array(jsonb_build_object('attempt', j.attempt, 'at', now(), 'code', $2::text, 'message', $3::text))
WHERE j.id = $1`),
		// $1 the job's lease ID.
		dropJobTickets:    q(`DELETE FROM {tickets} WHERE lease_id = $1`),
		lockResourceState: q(`SELECT state FROM {resources} WHERE key = $1 FOR UPDATE`),
		// $1 id, $2 worker, $3 owner, $4 token, $5 start, $6 lease expiry, $7 timeout ms.
		startHolds: q(`UPDATE {jobs} j SET state = 'running', attempt = j.attempt + 1, attempted_at = $5, worker = $2,
	owner = $3, reaped = false, token = $4, lease_expires_at = $6, timeout_ms = $7, cancel_requested = false, gated = false
WHERE j.id = $1 RETURNING ` + jobCols),
		// $1 key, $2 the kind's running state.
		setRunningState: q(`UPDATE {resources} r SET state = $2, version = r.version + CASE WHEN r.state <> $2 THEN 1 ELSE 0 END,
	updated_at = CASE WHEN r.state <> $2 THEN now() ELSE r.updated_at END WHERE r.key = $1`),
		// $1 id, $2 the resource's state, $3 the kind's from states.
		rejectHolds: q(`UPDATE {jobs} j SET state = 'discarded', head = false, finished_at = now(),
	errors = j.errors || jsonb_build_array(jsonb_build_object('attempt', j.attempt, 'at', now(),
		'code', 'invalid_resource_state', 'message', format('resource %s is in state %s; kind %s starts from %s',
			to_json(j.resource), to_json($2::text), to_json(j.kind), to_json($3::text[]))))
WHERE j.id = $1`),
		markWaiting:     q(`UPDATE {kinds} SET waiting_until = now() + interval '30 seconds' WHERE name = ANY($1) AND waiting_until < now() + interval '20 seconds'`),
		lockRejected:    q(`SELECT 1 FROM {resources} WHERE key IN (` + rejectedSet + `) ORDER BY key FOR UPDATE`),
		promoteRejected: q(strings.ReplaceAll(promote, "{set}", rejectedSet)),

		// $1 id, $2 token, $3 ttl ms, $4 owner.
		// An attempt that holds its key's leases row as its gate extends the row with it.
		heartbeat: q(`WITH u AS (
	UPDATE {jobs} j SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
	WHERE j.id = $1 AND j.token = $2 AND j.owner = $4 AND j.state = 'running' AND j.lease_expires_at > now() AND NOT j.holds
	RETURNING j.id, j.resource, j.gated, j.cancel_requested, j.lease_expires_at
), g AS (
	UPDATE {leases} l SET expires_at = u.lease_expires_at, available_at = u.lease_expires_at
	FROM u WHERE u.gated AND l.key = u.resource AND l.job_id = u.id
)
SELECT u.cancel_requested, (extract(epoch FROM u.lease_expires_at - now()) * 1000000)::bigint FROM u`),
		finish:       q(finishSQL),
		completeMany: q(completeManySQL),
		// A plan made on an empty table reads the jobs table once here, for "id = ANY($1)":
		// finding the ended jobs through jobs_finished by the transaction's now() instead (their
		// finished_at) cost 25-55% more PostgreSQL CPU a job with real statistics.
		promoteMany:     q(strings.ReplaceAll(promote, "{set}", `SELECT resource FROM {jobs} WHERE id = ANY($1)`)),
		lockFinished:    q(`SELECT 1 FROM {resources} WHERE key = (SELECT resource FROM {jobs} WHERE id = $1) FOR UPDATE`),
		promoteFinished: q(strings.ReplaceAll(promote, "{set}", `SELECT resource FROM {jobs} WHERE id = $1`)),

		lockReplaced:           q(lockReplacedSQL),
		lockReplacedNowait:     q(lockReplacedNowaitSQL),
		askRunningToStop:       q(strings.ReplaceAll(askRunningToStopSQL, "{nowait}", "")),
		supersede:              q(strings.ReplaceAll(supersedeSQL, "{nowait}", "")),
		askRunningToStopNowait: q(strings.ReplaceAll(askRunningToStopSQL, "{nowait}", " NOWAIT")),
		supersedeNowait:        q(strings.ReplaceAll(supersedeSQL, "{nowait}", " NOWAIT")),

		lockJob:   q(`SELECT ` + jobCols + ` FROM {jobs} j WHERE j.id = $1 FOR UPDATE`),
		setCancel: q(`UPDATE {jobs} j SET cancel_requested = true WHERE j.id = $1 RETURNING ` + jobCols),
		cancel:    q(cancelSQL),
		retryFinal: q(`UPDATE {jobs} j SET state = 'available', seq = nextval({job_seq}), scheduled_at = now(),
	finished_at = NULL, cancel_requested = false, max_attempts = greatest(j.max_attempts, j.attempt + 1),
	head = NOT EXISTS (SELECT 1 FROM {jobs} u WHERE u.resource = j.resource AND u.state IN ` + unfinished + `)
WHERE j.id = $1 RETURNING ` + jobCols),
		retryNow: q(`UPDATE {jobs} j SET scheduled_at = now() WHERE j.id = $1 RETURNING ` + jobCols),
		purge: q(`DELETE FROM {jobs} j WHERE j.state = 'discarded'
AND (cardinality($1::bigint[]) = 0 OR j.id = ANY($1)) AND ($2 = '' OR j.kind = $2) AND ($3 = '' OR j.resource = $3)`),

		reapCandidates: q(`SELECT j.id, j.token, j.lease_expires_at IS NULL FROM {jobs} j
WHERE j.state = 'running' AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= now())
ORDER BY j.lease_expires_at NULLS FIRST LIMIT $1`),
		// The cleaner also deletes the line's expired tickets (abandoned waits), which everyone
		// skips: a waiter that comes back starts again at the back either way; and holds (shared,
		// several keys, limits) that ended or expired longer ago than the age and the longest
		// rest (their lock-delays are over; a release this late learns ErrNotHeld).
		clean: q(`WITH old_grants AS (
	DELETE FROM {rate_grants} WHERE ctid = ANY (ARRAY(SELECT ctid FROM {rate_grants}
		WHERE at < now() - interval '` + strconv.FormatInt(int64(store.MaxRateWindow/time.Second), 10) + ` seconds' LIMIT $3))
), expired AS (
	DELETE FROM {tickets} WHERE ctid = ANY (ARRAY(SELECT ctid FROM {tickets} WHERE expires_at < now() LIMIT $3))
), old_holds AS (
	DELETE FROM {holds} WHERE ctid = ANY (ARRAY(SELECT ctid FROM {holds}
		WHERE expires_at < now() - greatest($1::bigint, ` + strconv.FormatInt(store.MaxRest.Milliseconds(), 10) + `) * interval '1 millisecond'
		LIMIT $3))
)
DELETE FROM {jobs} WHERE id IN (
	SELECT id FROM {jobs} WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped', 'superseded')
	AND finished_at < now() - least($1::bigint, $4::bigint) * interval '1 millisecond'
	AND CASE WHEN state = 'discarded' THEN $2::bool AND finished_at < now() - $4::bigint * interval '1 millisecond'
		ELSE finished_at < now() - $1::bigint * interval '1 millisecond' END
	ORDER BY finished_at LIMIT $3)`),
		counts: q(`SELECT kind, state, count(*) FROM {jobs} WHERE state IN ` + unfinished + ` GROUP BY kind, state ORDER BY kind, state`),

		resourceGet: q(`SELECT r.key, r.state, r.version, r.updated_at,
	coalesce((SELECT min(j.id) FROM {jobs} j WHERE j.resource = r.key AND j.state = 'running'), 0),
	(SELECT count(*) FROM {jobs} j WHERE j.resource = r.key AND j.state IN ` + unfinished + `),
	CASE WHEN r.cooldown_until > now() THEN r.cooldown_until END, r.cooldown_job,
	(extract(epoch FROM r.cooldown_until - now()) * 1000000)::bigint
FROM {resources} r WHERE r.key = $1`),
		resourceList: q(`SELECT r.key, r.state, r.version, r.updated_at,
	coalesce((SELECT min(j.id) FROM {jobs} j WHERE j.resource = r.key AND j.state = 'running'), 0),
	(SELECT count(*) FROM {jobs} j WHERE j.resource = r.key AND j.state IN ` + unfinished + `),
	CASE WHEN r.cooldown_until > now() THEN r.cooldown_until END, r.cooldown_job,
	(extract(epoch FROM r.cooldown_until - now()) * 1000000)::bigint
FROM {resources} r WHERE r.key >= $1 AND left(r.key, length($1)) = $1 AND r.key > $2
ORDER BY r.key LIMIT $3`),
		// The upper bound keeps the index scan inside the prefix's range (see the leases' list).
		resourceListBounded: q(`SELECT r.key, r.state, r.version, r.updated_at,
	coalesce((SELECT min(j.id) FROM {jobs} j WHERE j.resource = r.key AND j.state = 'running'), 0),
	(SELECT count(*) FROM {jobs} j WHERE j.resource = r.key AND j.state IN ` + unfinished + `),
	CASE WHEN r.cooldown_until > now() THEN r.cooldown_until END, r.cooldown_job,
	(extract(epoch FROM r.cooldown_until - now()) * 1000000)::bigint
FROM {resources} r WHERE r.key >= $1 AND r.key < $4 AND left(r.key, length($1)) = $1 AND r.key > $2
ORDER BY r.key LIMIT $3`),
		resourceVersion: q(`SELECT version FROM {resources} WHERE key = $1 FOR UPDATE`),
		resourceSet: q(`INSERT INTO {resources} AS r (key, state, version) VALUES ($1, $2, 1)
ON CONFLICT (key) DO UPDATE SET state = excluded.state, version = r.version + 1, updated_at = now()
RETURNING r.key, r.state, r.version, r.updated_at`),
	}
}

// Filters of ListJobs, as bits of listKey.filters.
const (
	listByKind = 1 << iota
	listByResource
)

// listKey picks ListJobs' statement: the kind and resource filters in use, and the state.
type listKey struct {
	filters int
	state   store.JobState // "" for any
}

// jobStates are the states a listing may filter by; each gets statements of its own, with the
// state written in (from this list, never from a caller), so that a partial index whose
// predicate names the state can serve it under the store's generic plans.
var jobStates = []store.JobState{store.JobScheduled, store.JobAvailable, store.JobRunning, store.JobRetryable,
	store.JobSucceeded, store.JobCancelled, store.JobDiscarded, store.JobSkipped, store.JobSuperseded}

const finished = `('succeeded', 'cancelled', 'discarded', 'skipped', 'superseded')`

func listJobsStatements(q func(string) string) map[listKey]string {
	out := make(map[listKey]string)
	for filters := 0; filters < 4; filters++ {
		out[listKey{filters, ""}] = q(listJobsSQL(filters, ""))
		for _, st := range jobStates {
			out[listKey{filters, st}] = q(listJobsSQL(filters, st))
		}
	}
	return out
}

// listJobsSQL is ListJobs' statement for one set of filters and a state (or ""): $1 is the
// cursor, then the kind and the resource if filtered, numbered in that order, then the limit.
// With the store's generic plans, a condition written as "$2 = ” OR kind = $2" could not use an
// index, hence one statement per set. The jobs table has no index on (state, id) or (resource,
// id) for listings (migration 0003: they cost every state change an entry each), so:
//   - by resource: its unfinished jobs (jobs_unfinished_by_resource, sorted by ID: as many as
//     are queued on it) and its finished ones (jobs_finished_by_resource, in ID order), merged;
//   - by state: jobs in ID order, keeping those in the state, or a partial index naming the
//     state (jobs_discarded for the dead letters, jobs_unfinished_by_resource for a sparse
//     unfinished state), as the planner estimates cheaper.
func listJobsSQL(filters int, state store.JobState) string {
	where, n := "j.id > $1", 1
	if state != "" {
		where += " AND j.state = '" + string(state) + "'"
	}
	if filters&listByKind != 0 {
		n++
		where += " AND j.kind = $" + strconv.Itoa(n)
	}
	if filters&listByResource != 0 {
		n++
		where += " AND j.resource = $" + strconv.Itoa(n)
	}
	limit := "$" + strconv.Itoa(n+1)
	if filters&listByResource == 0 || state != "" {
		return `SELECT ` + jobCols + ` FROM {jobs} j WHERE ` + where + ` ORDER BY j.id LIMIT ` + limit
	}
	branch := func(states string) string {
		return `(SELECT j.* FROM {jobs} j WHERE ` + where + ` AND j.state IN ` + states + ` ORDER BY j.id LIMIT ` + limit + `)`
	}
	return `SELECT ` + jobCols + ` FROM (` + branch(unfinished) + ` UNION ALL ` + branch(finished) +
		`) j ORDER BY j.id LIMIT ` + limit
}

// rejectedSet names the resources of jobs a claim statement of this transaction discarded by
// their state guard: now() is the transaction's start, so it singles them out (a match from
// another transaction would only make promote re-check a resource, which is always correct).
const rejectedSet = `SELECT resource FROM {jobs} WHERE state = 'discarded' AND finished_at = now()`

// One resource, one line: a head whose key a lease holds or rests after (its leases row is not
// available), or for which a lock ticket that arrived before it waits (a live ticket, or any
// break-glass one), is not picked. The keys with a live ticket are read once per claim (an
// array, usually empty), and a head's tickets are looked up only if its key is among them: run
// for every head the scan examined, the lookup cut the claims of many workers at once (20,000
// jobs, 100 slots) to a third of their speed. gate takes the key's leases row for each picked job of a lock key
// (a key with a row; or one the job was gated on when the key became one, see resource_line.go,
// whose row this statement's snapshot may not see: ON CONFLICT finds it anyway): it locks the
// row, re-checks that it is available on its latest version (a lease granted meanwhile refuses
// it) and draws the attempt's token under that lock, so that per key tokens strictly increase
// across leases and attempts. A job whose gate was refused is not started, and is picked again
// by a later claim. Jobs of keys that were never locked write no row. The probes of leases are
// written as LIMIT 1 subqueries, which PostgreSQL runs per row through the primary key: as
// EXISTS, a plan made while the table was small hashed a scan of the whole table.
//
// claimSQL starts up to $2 claimable heads of kinds $1 (those without a rate: rates.go) for worker $3 with a lease of $4 ms, as
// attempts of owner $5: heads without holds only, and none unless $6 while a claimable head with
// holds of the kinds waits (those are tried first: jobs_beyond.go).
//
// picked walks, per kind, the claimable-heads index in (priority, seq) order and locks heads
// with SKIP LOCKED, so workers never wait for each other and claiming costs O(limit · log n)
// however many heads wait (a "kind = ANY(...)" scan would sort them all). FOR UPDATE re-checks the
// WHERE on the latest row version, so a head that changed meanwhile is skipped. With several
// kinds, up to limit heads per kind are locked and the best limit started; the others are
// released at commit. guard checks
// each guarded kind's state rule with an UPDATE of the resource row: its WHERE is re-checked on
// the latest version after any concurrent change commits, so the check and the new running state
// are one step. started draws the fencing token after the job row is locked (a value drawn
// before could be overtaken; see docs/guarantees.md). rejected discards heads whose guard
// refused; lockRejected and promoteRejected, run next in the same transaction, promote their
// successors. The "= ANY (ARRAY(...))" conditions keep every join on an index whatever LIMIT the
// planner assumes, so a cached generic plan is as good as a custom one and planning (half the
// cost of a small claim) is skipped.
// started and rejected also find each picked row by its key in jobs_claimable (kind, priority,
// seq, with the index's predicate: all true of a row picked and locked above, whose latest version
// FOR UPDATE re-checked), so that even a generic plan made while the table was nearly empty (each
// connection keeps it until the next ANALYZE) looks the rows up through an index: joined by id
// alone, such a plan scanned the whole table once per picked job, 0.35-0.5 s for a claim of 50
// jobs once 20,000 rows were behind them.
// guard and rejected also say EXISTS (a candidate is guarded), which PostgreSQL checks once,
// before their scans: for the usual claim, of unguarded kinds only, neither reads resources at
// all (a generic plan for a table of 1,000 resources read it whole, 20% of a one-job claim).
const claimSQL = `WITH picked AS (
	SELECT x.* FROM unnest(ARRAY(SELECT name FROM {kinds} WHERE name = ANY ($1::text[]) AND rate_max = 0)) AS kk (kind) CROSS JOIN LATERAL (
		SELECT j.id, j.kind, j.resource, j.attempt, j.priority, j.seq, j.gated
		FROM {jobs} j
		WHERE j.kind = kk.kind AND j.head AND j.state IN ('scheduled', 'available', 'retryable')
			AND j.scheduled_at <= now() AND NOT j.holds AND ($6::boolean OR NOT EXISTS (SELECT 1 FROM {jobs} hj
				WHERE hj.kind = ANY ($1::text[]) AND hj.holds AND hj.head AND hj.state IN ('scheduled', 'available', 'retryable')
					AND hj.scheduled_at <= now()))
			AND (SELECT true FROM {leases} l WHERE l.key = j.resource AND l.available_at > now() LIMIT 1) IS NULL
			AND (j.resource <> ALL (ARRAY(SELECT w.key FROM {tickets} w WHERE w.expires_at > now()))
				OR (SELECT true FROM {tickets} t WHERE t.key = j.resource AND t.expires_at > now()
					AND (t.first OR t.created_at < j.created_at) LIMIT 1) IS NULL)
		ORDER BY j.priority, j.seq
		LIMIT $2
		FOR UPDATE OF j SKIP LOCKED
	) x
	ORDER BY x.priority, x.seq
	LIMIT $2
), cand AS (
	SELECT p.id, p.kind, p.priority, p.seq, p.resource, p.attempt, k.from_states, k.running_state, k.timeout_ms,
		cardinality(k.from_states) > 0 OR k.running_state <> '' AS guarded,
		coalesce(p.gated, false) OR (SELECT true FROM {leases} l WHERE l.key = p.resource LIMIT 1) IS NOT NULL AS gate
	FROM picked p JOIN {kinds} k ON k.name = p.kind
), gate AS (
	INSERT INTO {leases} AS l (key, lease_id, holder, owner, token, acquired_at, expires_at, ended, available_at,
		cooldown_ms, lock_delay_ms, job_id)
	SELECT c.resource, '', 'job:' || c.id, $5, nextval({token_seq}), now(), now() + $4::bigint * interval '1 millisecond',
		0, now() + $4::bigint * interval '1 millisecond', 0, 0, c.id
	FROM cand c WHERE c.gate
	ON CONFLICT (key) DO UPDATE SET lease_id = '', holder = excluded.holder, owner = excluded.owner,
		token = nextval({token_seq}), acquired_at = now(), expires_at = excluded.expires_at, ended = 0,
		available_at = excluded.available_at, cooldown_ms = 0, lock_delay_ms = 0, metadata = NULL,
		took_over = false, job_id = excluded.job_id
	WHERE l.available_at <= now()
	RETURNING l.key, l.token
), guard AS (
	UPDATE {resources} r SET
		state = CASE WHEN c.running_state <> '' THEN c.running_state ELSE r.state END,
		version = r.version + CASE WHEN c.running_state <> '' AND c.running_state <> r.state THEN 1 ELSE 0 END,
		updated_at = CASE WHEN c.running_state <> '' AND c.running_state <> r.state THEN now() ELSE r.updated_at END
	FROM cand c
	WHERE r.key = ANY (ARRAY(SELECT resource FROM cand WHERE guarded)) AND c.guarded AND r.key = c.resource
		AND EXISTS (SELECT 1 FROM cand WHERE guarded)
		AND (cardinality(c.from_states) = 0 OR r.state = ANY(c.from_states)
		OR (c.attempt > 0 AND c.running_state <> '' AND r.state = c.running_state))
	RETURNING r.key
), started AS (
	UPDATE {jobs} j SET state = 'running', attempt = j.attempt + 1, attempted_at = now(), worker = $3,
		owner = $5, reaped = false,
		token = CASE WHEN c.gate THEN (SELECT g.token FROM gate g WHERE g.key = c.resource) ELSE nextval({token_seq}) END,
		lease_expires_at = now() + $4::bigint * interval '1 millisecond',
		timeout_ms = c.timeout_ms, cancel_requested = false, gated = c.gate
	FROM cand c
	WHERE j.id = ANY (ARRAY(SELECT id FROM cand)) AND j.id = c.id
		AND j.kind = c.kind AND j.priority = c.priority AND j.seq = c.seq AND j.head AND j.state IN ('scheduled', 'available', 'retryable')
		AND (NOT c.guarded OR c.resource IN (SELECT key FROM guard))
		AND (NOT c.gate OR c.resource IN (SELECT key FROM gate))
	RETURNING ` + jobCols + `
), rejected AS (
	UPDATE {jobs} j SET state = 'discarded', head = false, finished_at = now(),
		errors = j.errors || jsonb_build_array(jsonb_build_object('attempt', j.attempt, 'at', now(),
			'code', 'invalid_resource_state', 'message', format('resource %s is in state %s; kind %s starts from %s',
				to_json(r.key), to_json(r.state), to_json(j.kind), to_json(c.from_states))))
	FROM cand c, {resources} r
	WHERE j.id = ANY (ARRAY(SELECT id FROM cand WHERE guarded)) AND j.id = c.id AND c.guarded
		AND j.kind = c.kind AND j.priority = c.priority AND j.seq = c.seq AND j.head AND j.state IN ('scheduled', 'available', 'retryable')
		AND r.key = ANY (ARRAY(SELECT resource FROM cand WHERE guarded)) AND r.key = c.resource
		AND c.resource NOT IN (SELECT key FROM guard) AND EXISTS (SELECT 1 FROM cand WHERE guarded)
	RETURNING j.id
)
SELECT * FROM started`

// finishSQL ends the running attempt $1 with token $2 of owner $9: $3 true = success; else
// failure with code $4, message $5, permanent $6, backoff $7 ms. $8 true = the reaper: whoever
// owns the attempt, only if its lease has expired or is missing, and marked reaped (the audit
// log records the end as the store's own, with no principal). It locks the job row, then the
// resource row (the order every statement keeps), applies the kind's success or failure state
// and cooldown, and returns the job. (A data-modifying WITH runs to completion whether or not
// the main statement reads it.) promoteFinished follows in the same transaction.
//
// As in completeManySQL, the resource row is rewritten (res) only when the outcome changes it (a
// state, a cooldown) and otherwise only locked (lk), in the mode of that update. Which of the two
// applies depends on the job and its kind only, never on the resource row, so that a concurrent
// change to the row (re-checked by both) cannot leave it neither updated nor locked.
const finishSQL = `WITH j0 AS (
	SELECT j.id, j.kind, j.resource, j.attempt, j.max_attempts, j.cancel_requested, j.superseded_by,
		k.success_state, k.failure_state, k.cooldown_ms, k.resource_cooldown_ms
	FROM {jobs} j JOIN {kinds} k ON k.name = j.kind
	WHERE j.id = $1 AND j.token = $2 AND j.state = 'running'
		AND CASE WHEN $8::bool THEN j.lease_expires_at IS NULL OR j.lease_expires_at <= now() ELSE j.owner = $9 END
	FOR UPDATE OF j
), nx AS (
	SELECT j0.*, CASE
		WHEN $3::bool THEN 'succeeded'
		WHEN j0.cancel_requested AND j0.superseded_by <> 0 THEN 'superseded'
		WHEN j0.cancel_requested THEN 'cancelled'
		WHEN $6::bool OR j0.attempt >= j0.max_attempts THEN 'discarded'
		ELSE 'retryable' END AS next
	FROM j0
), s AS (
	SELECT nx.*, CASE nx.next WHEN 'succeeded' THEN nx.success_state WHEN 'retryable' THEN ''
		ELSE nx.failure_state END AS ns,
		nx.next <> 'retryable' AND (nx.cooldown_ms > 0 OR nx.resource_cooldown_ms > 0) AS cools
	FROM nx
), res AS (
	UPDATE {resources} r SET
		state = CASE WHEN s.ns <> '' THEN s.ns ELSE r.state END,
		version = r.version + CASE WHEN s.ns <> '' AND s.ns <> r.state THEN 1 ELSE 0 END,
		updated_at = CASE WHEN s.ns <> '' AND s.ns <> r.state THEN now() ELSE r.updated_at END,
		cooldowns = CASE WHEN s.next <> 'retryable' AND s.cooldown_ms > 0
			THEN r.cooldowns || jsonb_build_object(s.kind, now() + s.cooldown_ms * interval '1 millisecond')
			ELSE r.cooldowns END,
		cooldown_until = CASE WHEN s.next <> 'retryable' AND s.resource_cooldown_ms > 0
			THEN greatest(r.cooldown_until, now() + s.resource_cooldown_ms * interval '1 millisecond')
			ELSE r.cooldown_until END,
		cooldown_job = CASE WHEN s.next <> 'retryable' AND s.resource_cooldown_ms > 0
			AND now() + s.resource_cooldown_ms * interval '1 millisecond' > coalesce(r.cooldown_until, '-infinity')
			THEN s.id ELSE r.cooldown_job END
	FROM s
	WHERE r.key = s.resource AND (s.ns <> '' OR s.cools)
	RETURNING r.key
), lk AS (
	SELECT r.key FROM {resources} r JOIN s ON r.key = s.resource
	WHERE s.ns = '' AND NOT s.cools
	FOR NO KEY UPDATE OF r
)
UPDATE {jobs} j SET state = nx.next, head = (nx.next = 'retryable'), lease_expires_at = NULL, reaped = $8, gated = NULL,
	finished_at = CASE WHEN nx.next = 'retryable' THEN NULL ELSE now() END,
	scheduled_at = CASE WHEN nx.next = 'retryable' THEN now() + $7::bigint * interval '1 millisecond'
		ELSE j.scheduled_at END,
	errors = CASE WHEN $3::bool THEN j.errors ELSE j.errors || jsonb_build_array(jsonb_build_object(
		'attempt', j.attempt, 'at', now(), 'code', $4::text, 'message', $5::text)) END
FROM nx
WHERE j.id = nx.id AND (SELECT count(*) FROM lk) >= 0
RETURNING ` + jobCols

// cancelSQL cancels job $1, which the caller locked and found neither running nor finished;
// the resource's failure state applies if it is the head and an attempt had started (a job
// retried by hand behind another must not touch the state that one set). Run with the resource
// locked.
const cancelSQL = `WITH res AS (
	UPDATE {resources} r SET state = k.failure_state, version = r.version + 1, updated_at = now()
	FROM {jobs} j JOIN {kinds} k ON k.name = j.kind
	WHERE j.id = $1 AND r.key = j.resource AND j.head AND j.attempt > 0 AND k.failure_state <> '' AND r.state <> k.failure_state
	RETURNING r.key
)
UPDATE {jobs} j SET state = 'cancelled', head = false, finished_at = now()
WHERE j.id = $1
RETURNING ` + jobCols

// completeManySQL is finishSQL's success path for many attempts at once: $1 ids, $2 tokens,
// $3 owners. Attempts that are no longer running with that token, or are another owner's, are
// left out of the result. Running jobs are on distinct resources, but for shared jobs, so the
// rows it locks are disjoint from any other completion's unless both end shared jobs of one
// resource (see completeAndClaim). The job rows are updated (and so locked) before their
// resources' rows, the order every statement keeps.
//
// The rows are found by id alone: "coalesce(j.state, ”) = 'running'" is that condition written
// so that no index can serve it. With a plain "state = 'running'" beside the ids, the cached
// generic plan walked every running job (an index on state, estimated at one row because the
// statistics were taken with none running) and joined each with the ids: 230 ms for 100
// completions at 1,000 running jobs. The requests drive the join (a nested loop over them, each
// row found through the primary key): with "j.id = ANY ($1)" added, the plan drove from the
// jobs instead and rescanned the unnest for each row, quadratic in the batch (475 ms of a 571 ms
// completion of 676 jobs). Updating the rows directly, rather than locking them first
// (SELECT ... FOR UPDATE) and then updating them, writes each row once.
//
// A resource row is rewritten (res) only when the kind changes it (a success state, a cooldown);
// otherwise it is only locked (lk, the lock mode of that update), which writes no new row
// version: the lock is what the promotion after this statement needs (see promote). lk runs
// because the final SELECT reads it.
const completeManySQL = `WITH j AS (
	UPDATE {jobs} j SET state = 'succeeded', head = false, lease_expires_at = NULL, finished_at = now(),
		reaped = false, gated = NULL
	FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS req (id, token, owner)
	WHERE j.id = req.id AND j.token = req.token AND j.owner = req.owner AND coalesce(j.state, '') = 'running'
	RETURNING j.*
), res AS (
	UPDATE {resources} r SET
		state = CASE WHEN k.success_state <> '' THEN k.success_state ELSE r.state END,
		version = r.version + CASE WHEN k.success_state <> '' AND k.success_state <> r.state THEN 1 ELSE 0 END,
		updated_at = CASE WHEN k.success_state <> '' AND k.success_state <> r.state THEN now() ELSE r.updated_at END,
		cooldowns = CASE WHEN k.cooldown_ms > 0
			THEN r.cooldowns || jsonb_build_object(j.kind, now() + k.cooldown_ms * interval '1 millisecond')
			ELSE r.cooldowns END,
		cooldown_until = CASE WHEN k.resource_cooldown_ms > 0
			THEN greatest(r.cooldown_until, now() + k.resource_cooldown_ms * interval '1 millisecond')
			ELSE r.cooldown_until END,
		cooldown_job = CASE WHEN k.resource_cooldown_ms > 0
			AND now() + k.resource_cooldown_ms * interval '1 millisecond' > coalesce(r.cooldown_until, '-infinity')
			THEN j.id ELSE r.cooldown_job END
	FROM j JOIN {kinds} k ON k.name = j.kind
	WHERE r.key = j.resource AND (k.success_state <> '' OR k.cooldown_ms > 0 OR k.resource_cooldown_ms > 0)
	RETURNING r.key
), lk AS (
	SELECT r.key FROM {resources} r JOIN j ON r.key = j.resource JOIN {kinds} k ON k.name = j.kind
	WHERE k.success_state = '' AND k.cooldown_ms = 0 AND k.resource_cooldown_ms = 0
	FOR NO KEY UPDATE OF r
)
SELECT ` + jobCols + ` FROM j WHERE (SELECT count(*) FROM lk) >= 0`
