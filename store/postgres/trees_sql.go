package postgres

import "strings"

// The statements of grants, releases and ends in trees (trees_grant.go). {…} names are replaced
// by the schema's tables (holdQueries' replacer); every value is a bind parameter.

// treeKeysCTE finds the tree of each key of the array keys (a SQL expression): k (key, prefix),
// prefix NULL for a key in no tree; and a (key), the ancestors of the keys in trees (store.
// TreeAncestors: the key cut before each "/" after its root). Each tree is one probe of the
// trees' primary key: the greatest prefix at or below store.TreeProbe(key), kept if it is a
// prefix of it.
func treeKeysCTE(keys string) string {
	return `tk AS (
	SELECT u.key, x.prefix FROM unnest(` + keys + `) AS u (key)
	LEFT JOIN LATERAL (SELECT t.prefix FROM {trees} t WHERE t.prefix <= u.key || '/' ORDER BY t.prefix DESC LIMIT 1) x
		ON starts_with(u.key || '/', x.prefix)
), ta AS (
	SELECT DISTINCT left(tk.key, i - 1) AS key FROM tk CROSS JOIN LATERAL generate_series(length(tk.prefix), length(tk.key)) AS i
	WHERE tk.prefix IS NOT NULL AND substr(tk.key, i, 1) = '/'
)`
}

// lockTreeSQL locks the leases rows of the keys (a SQL expression, text[]) and of their
// ancestors in trees, in one order, byte order of the keys: a key's row FOR UPDATE, an
// ancestor's that is no key of the set FOR SHARE. Each row is locked once, in its strongest mode,
// and every statement that locks more than one row locks them in that order, so none waits for
// another in a cycle. Two grants of related keys meet on a row (the ancestor's: FOR UPDATE by the
// one that asks for it, FOR SHARE by the one below it), and wait for each other; grants of
// siblings share their ancestors' locks and run together.
//
// It returns a row per key and ancestor, in that order: the key, whether it is a key of the set,
// its tree's prefix (” if none, or an ancestor), whether its leases row exists, and the row's
// columns as lockRows returns them (zero values if it does not).
func lockTreeSQL(keys string) string {
	return `WITH ` + treeKeysCTE(keys) + `, l AS (
	SELECT x.key, bool_or(x.req) AS req FROM (SELECT key, true AS req FROM tk UNION ALL SELECT key, false FROM ta) x GROUP BY x.key
)
SELECT l.key, l.req, coalesce((SELECT tk.prefix FROM tk WHERE tk.key = l.key LIMIT 1), ''),
	coalesce(u.key, s.key) IS NOT NULL,
	coalesce(u.lease_id, s.lease_id, ''), coalesce(u.holder, s.holder, ''), coalesce(u.token, s.token, 0),
	coalesce(u.expires_at, s.expires_at, 'epoch'), coalesce(u.available_at, s.available_at, 'epoch'),
	coalesce(u.ended, s.ended, 1), coalesce(u.job_id, s.job_id, 0)
FROM (SELECT l.key, l.req FROM l ORDER BY l.key COLLATE "C") l
LEFT JOIN LATERAL (SELECT r.key, r.lease_id, r.holder, r.token, r.expires_at, r.available_at, r.ended, r.job_id
	FROM {leases} r WHERE r.key = l.key AND l.req FOR UPDATE) u ON true
LEFT JOIN LATERAL (SELECT r.key, r.lease_id, r.holder, r.token, r.expires_at, r.available_at, r.ended, r.job_id
	FROM {leases} r WHERE r.key = l.key AND NOT l.req FOR SHARE) s ON true`
}

// relatedSQL reads what a request on a key of a tree meets on its related keys (store.Relate):
// its ancestors $1 (point lookups) and its descendants, [$2, $3) (one range of each index), at
// $4, for a request that is shared if $5, of lease ID $6, with its place in its lines if $7 (at
// $8, seq $9), arrived at $10:
//   - h: a live hold that conflicts with it (exclusive, or any for an exclusive request), the
//     latest to expire: key, lease ID, holder, token, expiry, mode;
//   - r: a rest after a related hold that expired or was force-released (its lock-delay, during
//     which its holder may still write), by the key's leases row, as ClearRest leaves it: key
//     and end; a descendant's is found through its holds not released;
//   - t: the live tickets of related lines before the caller (break-glass, or an earlier
//     arrival; every one of another request for a newcomer) that conflict with it: how many, and
//     the first's key, holder and arrival;
//   - j: the ready jobs of related lines submitted before its arrival that conflict with it (the
//     heads; for a shared request every exclusive one, head or not, as keyLine): how many, and
//     the first's ID, resource and submit.
var relatedSQL = `SELECT h.key, h.lease_id, h.holder, h.token, h.expires_at, h.mode, r.key, r.available_at,
	coalesce(t.n, 0), t.key, t.holder, t.created_at, coalesce(j.n, 0), j.id, j.resource, j.created_at
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
	SELECT h.key, h.lease_id, h.holder, h.token, h.expires_at, h.mode FROM {holds} h
	WHERE (h.key = ANY ($1::text[]) OR h.key >= $2 AND h.key < $3) AND h.ended = 0 AND h.expires_at > $4
		AND h.mode <> 'unit' AND NOT ($5::boolean AND h.mode = 'shared')
	ORDER BY h.expires_at DESC LIMIT 1
) h ON true
LEFT JOIN LATERAL (
	SELECT x.key, x.available_at FROM (
		SELECT l.key, l.available_at FROM {leases} l WHERE l.key = ANY ($1::text[]) AND ` + relatedRest + `
		UNION ALL
		SELECT l.key, l.available_at FROM (SELECT DISTINCT d.key FROM {holds} d WHERE d.key >= $2 AND d.key < $3
			AND d.ended IN (0, 2) AND d.mode <> 'unit' AND d.expires_at <= $4
			AND d.expires_at + d.lock_delay_ms * interval '1 millisecond' > $4) d
		JOIN {leases} l ON l.key = d.key AND ` + relatedRest + `
	) x ORDER BY x.available_at DESC LIMIT 1
) r ON true
LEFT JOIN LATERAL (
	SELECT count(*) OVER () AS n, t.key, t.holder, t.created_at FROM {tickets} t
	WHERE (t.key = ANY ($1::text[]) OR t.key >= $2 AND t.key < $3) AND t.lease_id <> $6 AND t.expires_at > $4
		AND NOT ($5::boolean AND t.mode = 'shared')
		AND (NOT $7::boolean OR t.first OR (t.created_at, t.seq) < ($8::timestamptz, $9::bigint))
	ORDER BY t.first DESC, t.created_at, t.seq LIMIT 1
) t ON true
LEFT JOIN LATERAL (
	SELECT count(*) OVER () AS n, x.id, x.resource, x.created_at FROM (
		SELECT j.id, j.resource, j.created_at FROM {jobs} j WHERE j.resource = ANY ($1::text[]) AND ` + relatedJob + `
		UNION ALL
		SELECT j.id, j.resource, j.created_at FROM {jobs} j WHERE j.resource >= $2 AND j.resource < $3 AND ` + relatedJob + `
	) x ORDER BY x.created_at, x.id LIMIT 1
) j ON true`

// relatedRest: the leases row l rests after a hold that expired or was force-released, at $4.
const relatedRest = `l.ended IN (0, 2) AND l.available_at > $4 AND NOT (l.ended = 0 AND l.expires_at > $4)`

// relatedJob: job j (unfinished: the partial index of a resource's unfinished jobs serves both
// arms) is ready at $4 and was submitted by $10, is not the caller ($6), and conflicts with a
// request that is shared if $5 (as relatedSQL says).
const relatedJob = `j.state IN ('scheduled', 'available', 'running', 'retryable') AND j.state <> 'running'
	AND (j.head OR $5::boolean) AND j.scheduled_at <= $4 AND j.created_at <= $10::timestamptz
	AND E'\x1fjob:' || j.id <> $6 AND NOT ($5::boolean AND j.shared)`

// maxRelatedWake bounds the descendants' lines one freed key wakes.
const maxRelatedWake = 64

// relatedLinesSQL lists the lines related to the keys (a SQL expression, text[]) that are in
// trees, at $now (a SQL expression): their ancestors' (whether anyone waits there or not: a
// point lookup each when the wake reads the line) and those of their descendants in which a live
// ticket or a ready head job waits, at most maxRelatedWake of them.
func relatedLinesSQL(keys, now string) string {
	return `WITH ` + treeKeysCTE(keys) + `
SELECT ta.key FROM ta
UNION
(SELECT d.key FROM tk CROSS JOIN LATERAL (
	SELECT t.key FROM {tickets} t WHERE t.key >= tk.key || '/' AND t.key < tk.key || '0' AND t.expires_at > ` + now + `
	UNION
	SELECT j.resource FROM {jobs} j WHERE j.resource >= tk.key || '/' AND j.resource < tk.key || '0' AND j.head
		AND j.state IN ('scheduled', 'available', 'retryable')
) d WHERE tk.prefix IS NOT NULL LIMIT ` + itoa(maxRelatedWake) + `)`
}

// relatedWakeSQL is the wake statement (holdQueries.wake) over the lines related to the keys
// (relatedLinesSQL), at $now, after a release: it NOTIFYs and returns the payloads of their
// fronts. notifyJobs is notifyJobs over them.
func relatedWakeSQL(wake, notifyJobs, keys, now string) (string, string) {
	lines := `ARRAY(SELECT x.key FROM (` + relatedLinesSQL(keys, now) + `) x ORDER BY x.key COLLATE "C")`
	w := strings.NewReplacer("unnest($1::text[])", "unnest("+lines+")", "$2", now, "$3::boolean", "false").Replace(wake)
	n := strings.ReplaceAll(notifyJobs, "($1::text[])", "("+lines+")")
	return w, n
}
