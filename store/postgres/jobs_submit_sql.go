package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// submitQueries are the two statements of a submit (one job or a batch), sent together in one
// pipeline: one round trip, one implicit transaction (the statements before a Sync).
type submitQueries struct {
	lock, insert, insertOne, insertNoKeys string
}

func buildSubmitQueries(schema, channel string) submitQueries {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// The schema is [a-z0-9_] and the channel derives from it, so neither can hold a quote.
	r := strings.NewReplacer(
		"{jobs}", id("jobs"), "{resources}", id("resources"), "{kinds}", id("job_kinds"),
		"{job_ids}", "'"+id("jobs_id_seq")+"'", "{job_seq}", "'"+id("job_seq")+"'",
		"{channel}", "'"+channel+"'", "{jobkey}", "E'\\x1fjob:'", "{unfinished}", unfinished, "{trees}", id("trees"), "{rate_prefixes}", id("rate_prefixes"),
	)
	return submitQueries{lock: r.Replace(submitLockSQL), insert: r.Replace(submitInsertSQL),
		insertOne: r.Replace(submitOneSQL), insertNoKeys: r.Replace(submitNoKeysSQL)}
}

// inTreeSQL is whether the resource res (a SQL expression) is a key of a tree (trees.go) or under
// a rated prefix (rates_scoped.go): such a job is granted through holds, and submitted the slower
// way (jobs_beyond.go), as a job of a kind "beyond" one exclusive key.
func inTreeSQL(res string) string {
	return `(EXISTS (SELECT 1 FROM (SELECT t.prefix FROM {trees} t WHERE t.prefix <= ` + res + ` || '/' ORDER BY t.prefix DESC LIMIT 1) x
		WHERE starts_with(` + res + ` || '/', x.prefix)) OR ` + ratedSQL(res) + `)`
}

// ratedSQL is whether the key k (a SQL expression) is under a rated prefix: the greatest one at
// or below it (one probe of the primary key) is a prefix of it. Rated prefixes never overlap.
func ratedSQL(k string) string {
	return `EXISTS (SELECT 1 FROM (SELECT rp.prefix FROM {rate_prefixes} rp WHERE rp.prefix <= ` + k + ` ORDER BY rp.prefix DESC LIMIT 1) xr
		WHERE starts_with(` + k + `, xr.prefix))`
}

// coolJoin finds the resource's cooldown (store.Kind.ResourceCooldown) if it has not ended:
// c.cool_until (NULL if none) and c.cool_job, for the job row f.
const coolJoin = `LEFT JOIN LATERAL (
		SELECT rs.cooldown_until AS cool_until, rs.cooldown_job AS cool_job FROM {resources} rs
		WHERE rs.key = f.resource AND rs.cooldown_until > now()
	) c ON true`

// resourceJoin reads, in one index probe, the resource row of the job row f: c.cooldown_until
// (the resource cooldown; it may have ended), c.cooldown_job, and c.kind_cooldown (the end of
// f's kind's cooldown there, as text; NULL if none). The row exists: submitLockSQL locked it.
// LIMIT 1 (the key is unique) keeps the subquery from being flattened into a join, which a
// connection's cached generic plan, made while the table was small, could make a hash join over
// a scan of every resource (in row order by hash, not batch order: the IDs would enter the
// indexes out of order).
const resourceJoin = `LEFT JOIN LATERAL (
		SELECT rs.cooldown_until, rs.cooldown_job, rs.cooldowns ->> f.kind AS kind_cooldown FROM {resources} rs
		WHERE rs.key = f.resource LIMIT 1
	) c ON true`

// coolError is the error entry of a job p skipped because its resource is cooling down, as
// store.CooldownSkipError writes it.
const coolError = `jsonb_build_array(jsonb_build_object('attempt', 0, 'at', now(), 'code', 'resource_cooldown',
			'message', format('resource %s recently remediated (job %s): cooling down until %s; skipped',
				to_json(p.resource::text), p.cool_job, to_char(p.cool_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
			'until', p.cool_until))`

// submitLockSQL creates the batch's resources that do not exist and locks every one of them, in
// key order (so that batches do not deadlock each other): from here to the commit, no other
// submit, promotion or job end can change which job heads them. It must be a statement of its
// own, before submitInsertSQL, so that that statement's snapshot sees every change committed
// before the locks were granted.
//
// "WHERE false" updates nothing but still locks each existing row (PostgreSQL locks a
// conflicting row before it evaluates the DO UPDATE's condition, in the mode the SET implies: FOR
// UPDATE, as the key is set), so an existing resource costs a row lock, not a new row version
// (with its index entry when the page has no room for a HOT update, and its WAL).
const submitLockSQL = `INSERT INTO {resources} AS r (key)
SELECT DISTINCT k FROM unnest($1::text[]) AS k ORDER BY k
ON CONFLICT (key) DO UPDATE SET key = r.key WHERE false`

// submitInsertSQL submits the jobs $1.. (one array per field, aligned; ” and 0 mean unset:
// the kind's) as if one after the other in array order. It returns the inserted jobs (existing
// false), then the jobs that the batch's idempotency keys already named (existing true); the
// caller puts them in batch order (the inserted ones' IDs follow it). Columns: existing, kinds
// notified, the job.
//
//   - known: idempotency keys that name a job already; every occurrence returns that job.
//   - fresh: the jobs to insert: no key, or the first occurrence of a new key (the later
//     occurrences return the first's job, as existing); n numbers them in batch order, rn
//     within their resource.
//   - drawn: IDs and queue positions for them, sorted, so that the n-th gets the n-th (the
//     resources are locked, so per resource they follow submission order).
//   - plan: the first fresh job of a resource reads the resource's head before the batch and
//     its kind's cooldown there. A fresh job is busy if its resource had a head, or if an
//     earlier fresh job of the batch is on the same resource (that one is the head then: it was
//     not busy, so it was queued whatever its policy). Busy and "skip": skipped, naming the
//     head; busy and "reject": the batch is refused; not busy: the head, its start raised to the
//     end of the cooldown.
//   - verdict: the first job that cannot be submitted (unknown kind, or refused) fails the whole
//     statement, and so the transaction, with an error that says which (see refusalRE).
//   - woken: NOTIFY, once per kind, workers that may be waiting for the new heads' kinds.
//
// Every step is a scan of the batch, a sort of it, or an index lookup per job (never a join of
// two CTEs, which a generic plan that expects ten rows could nest), so that the cost is linear.
var submitInsertSQL = `WITH req AS (
	SELECT t.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[],
		$8::timestamptz[], $9::bigint[], $10::text[]) WITH ORDINALITY
		AS t (kind, resource, args, ikey, policy, max_attempts, priority, at, delay_ms, tp, idx)
), known AS (
	SELECT j.idempotency_key AS ikey, j.id FROM (SELECT DISTINCT ikey FROM req WHERE ikey <> '') q
	CROSS JOIN LATERAL (SELECT j.idempotency_key, j.id FROM {jobs} j WHERE j.idempotency_key = q.ikey LIMIT 1) j
), fresh0 AS (
	SELECT r.*, CASE WHEN r.ikey = '' THEN r.idx ELSE min(r.idx) OVER (PARTITION BY r.ikey) END AS first
	FROM req r
	WHERE r.ikey = '' OR r.ikey <> ALL (ARRAY(SELECT ikey FROM known))
), fresh AS (
	SELECT f.*, row_number() OVER (ORDER BY f.idx) AS n, row_number() OVER (PARTITION BY f.resource ORDER BY f.idx) AS rn
	FROM fresh0 f WHERE f.idx = f.first
), drawn AS (
	SELECT (SELECT array_agg(a.v ORDER BY a.v) FROM (SELECT nextval({job_ids}) AS v FROM fresh) a) AS ids,
		(SELECT array_agg(a.v ORDER BY a.v) FROM (SELECT nextval({job_seq}) AS v FROM fresh) a) AS seqs
), kk AS (
	SELECT array_agg(k.name) AS names, array_agg(k.policy) AS policies, array_agg(k.max_attempts) AS max_attempts,
		array_agg(k.mode = 'shared' OR cardinality(k.limits) > 0 OR k.policy = 'replace' OR k.rate_max > 0) AS beyonds
	FROM {kinds} k WHERE k.name = ANY (ARRAY(SELECT DISTINCT kind FROM fresh))
), plan0 AS MATERIALIZED (
	SELECT f.idx, f.kind, f.resource, f.args, f.ikey, f.priority, f.rn, f.tp, d.ids[f.n] AS id, d.seqs[f.n] AS seq,
		array_position(kk.names, f.kind) IS NOT NULL AS kind_known,
		coalesce(kk.beyonds[array_position(kk.names, f.kind)], false) OR ` + inTreeSQL("f.resource") + ` AS kind_beyond,
		coalesce(nullif(f.policy, ''), kk.policies[array_position(kk.names, f.kind)]) AS policy,
		coalesce(nullif(f.max_attempts, 0), kk.max_attempts[array_position(kk.names, f.kind)]) AS max_attempts,
		coalesce(f.at, now() + f.delay_ms * interval '1 millisecond') AS at0,
		h.id AS h0_id, h.state AS h0_state,
		CASE WHEN f.rn = 1 THEN c.kind_cooldown::timestamptz END AS cooldown_end,
		CASE WHEN c.cooldown_until > now() THEN c.cooldown_until END AS cool_until, c.cooldown_job AS cool_job
	FROM fresh f CROSS JOIN drawn d CROSS JOIN kk
	` + resourceJoin + `
	LEFT JOIN LATERAL (
		SELECT u.id, u.state FROM {jobs} u WHERE u.resource = f.resource AND u.state IN {unfinished} AND f.rn = 1
		ORDER BY u.seq LIMIT 1
	) h ON true
), plan1 AS (
	SELECT p.*, first_value(p.h0_id) OVER w IS NOT NULL OR p.rn > 1 AS busy,
		coalesce(first_value(p.h0_id) OVER w, first_value(p.id) OVER w) AS h_id,
		coalesce(first_value(p.h0_state) OVER w,
			CASE WHEN first_value(greatest(p.at0, p.cooldown_end)) OVER w > now() THEN 'scheduled' ELSE 'available' END) AS h_state
	FROM plan0 p
	WINDOW w AS (PARTITION BY p.resource ORDER BY p.idx)
), plan AS (
	SELECT p.*, p.cool_until IS NOT NULL OR p.busy AND p.policy = 'skip' AS skipped,
		p.cool_until IS NULL AND p.busy AND p.policy = 'reject' AS rejected,
		CASE WHEN p.busy THEN p.at0 ELSE greatest(p.at0, p.cooldown_end) END AS at1
	FROM plan1 p
), bad AS (
	SELECT p.idx, CASE WHEN NOT p.kind_known THEN 'kind' WHEN p.kind_beyond THEN 'beyond' ELSE 'busy' END AS why,
		p.h_id, p.h_state
	FROM plan p WHERE NOT p.kind_known OR p.kind_beyond OR p.rejected
	ORDER BY p.idx LIMIT 1
), verdict AS (
	SELECT CASE WHEN b.idx IS NULL THEN true
		ELSE CAST('baton-batch-refused:' || b.why || ':' || b.idx || ':' || b.h_id || ':' || b.h_state AS int) > 0
		END AS ok
	FROM (VALUES (1)) AS one (x) LEFT JOIN bad b ON true
), ins AS (
	INSERT INTO {jobs} AS j (id, seq, kind, resource, args, state, head, max_attempts, priority, idempotency_key,
		scheduled_at, finished_at, errors, traceparent)
	SELECT p.id, p.seq, p.kind, p.resource, p.args::jsonb,
		CASE WHEN p.skipped THEN 'skipped' WHEN p.at1 > now() THEN 'scheduled' ELSE 'available' END,
		NOT p.busy AND p.cool_until IS NULL, p.max_attempts, p.priority, nullif(p.ikey, ''), p.at1,
		CASE WHEN p.skipped THEN now() END,
		CASE WHEN p.cool_until IS NOT NULL THEN ` + coolError + `
		WHEN p.skipped THEN jsonb_build_array(jsonb_build_object('attempt', 0, 'at', now(),
			'code', 'resource_busy', 'message', format('resource busy: job %s is %s', p.h_id, p.h_state)))
			ELSE '[]'::jsonb END,
		nullif(p.tp, '')
	FROM plan p
	WHERE (SELECT ok FROM verdict)
	RETURNING ` + jobCols + `
), woken AS (
	SELECT pg_notify({channel}, {jobkey} || k.name) FROM {kinds} k
	WHERE k.name = ANY (ARRAY(SELECT DISTINCT kind FROM ins WHERE head)) AND k.waiting_until > now()
)
SELECT false, (SELECT count(*) FROM woken)::int, i.* FROM ins i
UNION ALL
SELECT true, 0, ` + jobCols + ` FROM known k CROSS JOIN LATERAL (SELECT * FROM {jobs} j WHERE j.id = k.id LIMIT 1) j`

// submitOneSQL is submitInsertSQL for one job ($1 kind, $2 resource, $3 args, $4 key, $5 policy,
// $6 max attempts, $7 priority, $8 time or null, $9 delay ms, $10 traceparent, empty for none),
// without the batch's arrays, sorts and windows: a single Submit costs the database about what the statements of a hand-written
// submit would, in one round trip.
var submitOneSQL = `WITH ex AS (
	SELECT ` + jobCols + ` FROM {jobs} j WHERE $4::text <> '' AND j.idempotency_key = $4::text
), h AS (
	SELECT u.id, u.state FROM {jobs} u WHERE u.resource = $2::text AND u.state IN {unfinished}
	ORDER BY u.seq LIMIT 1
), v AS (
	SELECT k.name IS NOT NULL AS kind_known,
		coalesce(k.mode = 'shared' OR cardinality(k.limits) > 0 OR k.policy = 'replace' OR k.rate_max > 0, false)
			OR ` + inTreeSQL("$2::text") + ` AS kind_beyond,
		coalesce(nullif($5::text, ''), k.policy) AS policy,
		coalesce(nullif($6::int, 0), k.max_attempts) AS max_attempts, h.id AS h_id, h.state AS h_state,
		$2::text AS resource, c.cool_until, c.cool_job,
		CASE WHEN h.id IS NULL THEN greatest(t.at,
			(SELECT (rs.cooldowns ->> $1::text)::timestamptz FROM {resources} rs WHERE rs.key = $2::text))
			ELSE t.at END AS at
	FROM (SELECT coalesce($8::timestamptz, now() + $9::bigint * interval '1 millisecond') AS at) t
	LEFT JOIN {kinds} k ON k.name = $1::text
	LEFT JOIN h ON true
	` + strings.ReplaceAll(coolJoin, "f.resource", "$2::text") + `
	WHERE NOT EXISTS (SELECT 1 FROM ex)
), verdict AS (
	SELECT CASE WHEN NOT v.kind_known THEN CAST('baton-batch-refused:kind:1::' || coalesce(v.h_state, '') AS int) > 0
		WHEN v.kind_beyond THEN CAST('baton-batch-refused:beyond:1::' || coalesce(v.h_state, '') AS int) > 0
		WHEN v.h_id IS NOT NULL AND v.policy = 'reject' AND v.cool_until IS NULL
			THEN CAST('baton-batch-refused:busy:1:' || v.h_id || ':' || v.h_state AS int) > 0
		ELSE true END AS ok
	FROM v
), ins AS (
	INSERT INTO {jobs} AS j (seq, kind, resource, args, state, head, max_attempts, priority, idempotency_key,
		scheduled_at, finished_at, errors, traceparent)
	SELECT nextval({job_seq}), $1::text, $2::text, $3::jsonb,
		CASE WHEN v.cool_until IS NOT NULL OR v.h_id IS NOT NULL AND v.policy = 'skip' THEN 'skipped'
			WHEN v.at > now() THEN 'scheduled' ELSE 'available' END,
		v.h_id IS NULL AND v.cool_until IS NULL, v.max_attempts, $7::int, nullif($4::text, ''), v.at,
		CASE WHEN v.cool_until IS NOT NULL OR v.h_id IS NOT NULL AND v.policy = 'skip' THEN now() END,
		CASE WHEN v.cool_until IS NOT NULL THEN ` + strings.ReplaceAll(coolError, "p.", "v.") + `
		WHEN v.h_id IS NOT NULL AND v.policy = 'skip' THEN jsonb_build_array(jsonb_build_object('attempt', 0,
			'at', now(), 'code', 'resource_busy', 'message', format('resource busy: job %s is %s', v.h_id, v.h_state)))
			ELSE '[]'::jsonb END,
		nullif($10::text, '')
	FROM v, verdict
	WHERE verdict.ok
	RETURNING ` + jobCols + `
), woken AS (
	SELECT pg_notify({channel}, {jobkey} || k.name) FROM {kinds} k
	WHERE k.name = $1::text AND k.waiting_until > now() AND EXISTS (SELECT 1 FROM ins WHERE ins.head)
)
SELECT false, (SELECT count(*) FROM woken)::int, i.* FROM ins i
UNION ALL
SELECT true, 0, ex.* FROM ex`

// submitNoKeysSQL is submitInsertSQL for a batch without idempotency keys (the usual bulk load),
// in which every job is inserted: the arrays are submitInsertSQL's but the keys ($1 kinds, $2
// resources, $3 args, $4 policies, $5 max attempts, $6 priorities, $7 times, $8 delays), and the
// caller numbers each job's rank within its resource ($9, from 1) and gives the index of the
// resource's first job of the batch ($10, from 1), so that
// no step sorts the batch. The first job of a resource reads the resource's head before the
// batch and the kind's cooldown; a later one is busy (behind the first), and reads the head
// before the batch only if it needs to name it (skip, reject).
var submitNoKeysSQL = `WITH req AS (
	SELECT t.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[],
		$7::timestamptz[], $8::bigint[], $9::int[], $10::int[], $11::text[]) WITH ORDINALITY
		AS t (kind, resource, args, policy, max_attempts, priority, at, delay_ms, rn, first, tp, idx)
), drawn AS (
	SELECT (SELECT array_agg(a.v ORDER BY a.v) FROM (SELECT nextval({job_ids}) AS v
			FROM generate_series(1, cardinality($1::text[]))) a) AS ids,
		(SELECT array_agg(a.v ORDER BY a.v) FROM (SELECT nextval({job_seq}) AS v
			FROM generate_series(1, cardinality($1::text[]))) a) AS seqs
), kk AS (
	SELECT array_agg(k.name) AS names, array_agg(k.policy) AS policies, array_agg(k.max_attempts) AS max_attempts,
		array_agg(k.mode = 'shared' OR cardinality(k.limits) > 0 OR k.policy = 'replace' OR k.rate_max > 0) AS beyonds
	FROM {kinds} k WHERE k.name = ANY (ARRAY(SELECT DISTINCT u.kind FROM unnest($1::text[]) AS u (kind)))
), plan0 AS (
	SELECT r.idx, r.kind, r.resource, r.args, r.priority, r.rn, r.first, r.tp, d.ids[r.idx] AS id, d.seqs[r.idx] AS seq,
		d.ids[r.first] AS first_id,
		array_position(kk.names, r.kind) IS NOT NULL AS kind_known,
		coalesce(kk.beyonds[array_position(kk.names, r.kind)], false) OR ` + inTreeSQL("r.resource") + ` AS kind_beyond,
		coalesce(nullif(r.policy, ''), kk.policies[array_position(kk.names, r.kind)]) AS policy,
		coalesce(nullif(r.max_attempts, 0), kk.max_attempts[array_position(kk.names, r.kind)]) AS max_attempts,
		coalesce(r.at, now() + r.delay_ms * interval '1 millisecond') AS at0,
		h.id AS h0_id, h.state AS h0_state,
		CASE WHEN r.rn = 1 THEN c.kind_cooldown::timestamptz END AS cooldown_end,
		CASE WHEN c.cooldown_until > now() THEN c.cooldown_until END AS cool_until, c.cooldown_job AS cool_job
	FROM req r CROSS JOIN drawn d CROSS JOIN kk
	` + strings.ReplaceAll(resourceJoin, "f.", "r.") + `
	LEFT JOIN LATERAL (
		SELECT u.id, u.state FROM {jobs} u WHERE u.resource = r.resource AND u.state IN {unfinished}
			AND (r.rn = 1 OR coalesce(nullif(r.policy, ''), kk.policies[array_position(kk.names, r.kind)]) <> 'queue')
		ORDER BY u.seq LIMIT 1
	) h ON true
), plan AS (
	SELECT p.*, p.cool_until IS NOT NULL OR p.busy AND p.policy = 'skip' AS skipped,
		p.cool_until IS NULL AND p.busy AND p.policy = 'reject' AS rejected,
		CASE WHEN p.busy THEN p.at0 ELSE greatest(p.at0, p.cooldown_end) END AS at1
	FROM (SELECT p0.*, p0.h0_id IS NOT NULL OR p0.rn > 1 AS busy FROM plan0 p0) p
), firsts AS (
	-- When the batch's first job on a resource is the head a later one names: its start.
	SELECT array_agg(p.at1 ORDER BY p.idx) AS at1s FROM plan p
), bad AS (
	-- The first job that cannot be submitted, and the head a refused job names: the
	-- resource's before the batch, else the batch's first job on it (not busy: available or
	-- scheduled, by its start).
	SELECT p.idx, CASE WHEN NOT p.kind_known THEN 'kind' WHEN p.kind_beyond THEN 'beyond' ELSE 'busy' END AS why,
		CASE WHEN p.kind_known AND NOT p.kind_beyond THEN coalesce(p.h0_id, p.first_id) ELSE 0 END AS h_id,
		CASE WHEN NOT p.kind_known OR p.kind_beyond THEN ''
			ELSE coalesce(p.h0_state, CASE WHEN (SELECT at1s FROM firsts)[p.first] > now() THEN 'scheduled' ELSE 'available' END)
			END AS h_state
	FROM plan p WHERE NOT p.kind_known OR p.kind_beyond OR p.rejected
	ORDER BY p.idx LIMIT 1
), verdict AS (
	SELECT CASE WHEN b.idx IS NULL THEN true
		ELSE CAST('baton-batch-refused:' || b.why || ':' || b.idx || ':' || b.h_id || ':' || b.h_state AS int) > 0
		END AS ok
	FROM (VALUES (1)) AS one (x) LEFT JOIN bad b ON true
), woken AS (
	-- The kinds of the new heads (every job of plan is inserted, or the statement fails).
	SELECT pg_notify({channel}, {jobkey} || k.name) FROM {kinds} k
	WHERE k.name = ANY (ARRAY(SELECT DISTINCT p.kind FROM plan p WHERE NOT p.busy AND p.cool_until IS NULL))
		AND k.waiting_until > now()
)
INSERT INTO {jobs} AS j (id, seq, kind, resource, args, state, head, max_attempts, priority,
	scheduled_at, finished_at, errors, traceparent)
SELECT p.id, p.seq, p.kind, p.resource, p.args::jsonb,
	CASE WHEN p.skipped THEN 'skipped' WHEN p.at1 > now() THEN 'scheduled' ELSE 'available' END,
	NOT p.busy AND p.cool_until IS NULL, p.max_attempts, p.priority, p.at1, CASE WHEN p.skipped THEN now() END,
	CASE WHEN p.cool_until IS NOT NULL THEN ` + coolError + `
	WHEN p.skipped THEN jsonb_build_array(jsonb_build_object('attempt', 0, 'at', now(),
		'code', 'resource_busy', 'message', format('resource busy: job %s is %s', coalesce(p.h0_id, p.first_id),
			coalesce(p.h0_state, CASE WHEN (SELECT at1s FROM firsts)[p.first] > now() THEN 'scheduled' ELSE 'available' END))))
		ELSE '[]'::jsonb END,
	nullif(p.tp, '')
FROM plan p
WHERE (SELECT ok FROM verdict)
RETURNING false, (SELECT count(*) FROM woken)::int, ` + jobCols
