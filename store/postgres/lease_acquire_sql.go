package postgres

import "github.com/jackc/pgx/v5"

// acquireQuery is the statement that grants a free key, or renews the caller's own live lease
// (same holder and same owner), in one statement, and when it grants nothing it returns the row
// that refused it instead.
//
// Fencing: a token must exceed every token granted before on the key, in real time. A
// value drawn from the sequence before the grant can be overtaken (draw 5, stall; another
// session draws 6, acquires, releases; then 5 is granted). Here:
//   - The VALUES token is used only when the INSERT inserts, i.e. the key has no row.
//     Rows are never deleted, so that is the key's first grant ever: nothing to overtake.
//     (An operator deleting a row voids this; the store itself never does.) The VALUES
//     row is built even when the key has a row and the INSERT turns into the UPDATE, so
//     it draws from the sequence only when the statement's snapshot has no row for the
//     key (coalesce evaluates lazily): otherwise every refused attempt of a waiter, such
//     as an idle server polling for the maintenance lease, would burn a token.
//   - On conflict, DO UPDATE locks the existing row (waiting for any session that holds
//     it) before it evaluates WHERE and SET, so the nextval in SET is drawn after every
//     earlier grant of the key committed, and is larger than their tokens.
//   - CASE evaluates lazily and nextval is volatile, so a renewal draws nothing.
//
// The WHERE branches are disjoint. free ("a.available_at <= now()") is the takeover: a row
// with ended = 0 has available_at = expires_at + lock delay, so a free row is never live.
// mine is the live lease of the holder and owner ($9), which keeps its ID, token,
// acquisition time, metadata and rests and only gets a new expiry; a live lease of the
// same holder and another owner is not mine, and refuses the key like any other holder's.
// mark ($8, a waiting caller, refused by a live lease of another holder or owner) changes
// only waiters, so that the release of that lease sends a NOTIFY; it is done at most once
// per lease. A grant sets waiters when others wait in the key's line (othersWait): their
// tickets were enqueued before the grant, under the same row lock, so every ticket of a
// live lease's key either marked it or was seen by its grant.
//
// Refusal: DO UPDATE keeps its lock on the row even when WHERE rejects it, so the row
// cannot change before the statement ends. cur reads it FOR SHARE, which under READ
// COMMITTED follows the row to its latest version instead of the snapshot's: the very
// row that refused the grant. So the holder named in a refusal held the key when the
// grant was refused, not some time later. cur only runs when ins returned nothing
// (UNION ALL runs its arms in order), and finds nothing if the row was inserted after
// the statement's snapshot; Acquire then retries. A marked refusal comes back from ins
// with another holder's name: granted is false.
//
// now() is the statement's start. If the statement waited for the row lock, now() is
// earlier than the decision: that can refuse a key that came free while it waited
// (freed reports it; Acquire retries), but never grant one early.
//
// The line is read in the statement's snapshot, while the row is read at its latest version.
// A job's end frees the row and makes the resource's next job its head in one transaction, so a
// statement that waited for the row through it would read a line without that head: the free
// branch is not taken when the snapshot's row (snap) was held by a job's attempt. The refusal
// reports freed or blocked, and Acquire's next statement reads the line anew. (A release adds
// nobody to the line, so a statement that waited through one is granted as before.)
//
// Columns: granted, then leaseCols, then ended, microseconds until available, live,
// freed (available by the clock at the end of the wait), took over an expired lease, and
// blocked: free by the statement's clock yet not granted, so the WHERE (which saw the very
// row cur reads) found someone before the caller in the key's line.
// $1 key, $2 lease_id, $3 holder, $4 ttl ms, $5 metadata, $6 cooldown ms, $7 lock delay ms,
// $8 wait, $9 owner, $10 first (break-glass), $11 its reason.
//
// The line (lineFree): a free key is granted only when no live ticket and no ready head
// job arrived before the caller; enq enqueues a refused waiter's ticket (or keeps it
// alive, its place kept) and granted ends the caller's ticket, in the same statement.
// The row lock that serialises grants of the key is held while the line is read.
//
// Two variants. The waiting one (Wait or First set) enqueues a refused caller's ticket (enq),
// ends the caller's ticket when it is granted (granted), and on a grant sets waiters if others
// wait in the key's line, so that the release looks for the front to wake. tryAcquire (neither
// set) reads and writes no ticket of the caller's: it is granted only if no live ticket is in
// the line at all (tryLineFreeSQL), so it has none to end, and nobody waits. A refusal with a
// free key (blocked) may be the caller's own ticket from an earlier waiting attempt under the
// same lease ID: Acquire then runs the waiting statement, which knows the caller's place.
func acquireQuery(schema string, waiting bool) string {
	t := pgx.Identifier{schema, "leases"}.Sanitize()
	// The caller's own live lease: a row with no lease ID (a job's gate, a key's summary of
	// holds, holds.go) is nobody's, whatever its holder column says.
	mine := `(a.lease_id <> '' AND a.holder = excluded.holder AND a.owner = excluded.owner)`
	// The schema name is [a-z0-9_], so the quoted identifier cannot contain a single quote.
	seq := "'" + pgx.Identifier{schema, "token_seq"}.Sanitize() + "'"
	tk := pgx.Identifier{schema, "tickets"}.Sanitize()
	snap := `snap AS MATERIALIZED (SELECT k.token, k.available_at > now() AND k.job_id <> 0 AS gated FROM ` + t + ` k WHERE k.key = $1)`
	tree := treeProbeCTE(schema)
	othersWait := `EXISTS (SELECT FROM ` + tk + ` w WHERE w.key = $1 AND w.lease_id <> $2 AND w.expires_at > now())`
	var head, lineFree, waiters, lineWrites string
	if waiting {
		head, lineFree, waiters = `WITH `+meCTE(schema)+`, `+snap+`, `+tree+`, ins AS (`, lineFreeSQL(schema), othersWait
		lineWrites = `), enq AS (
	INSERT INTO ` + tk + ` AS tk (key, lease_id, holder, owner, created_at, expires_at, first, actor, reason)
	SELECT $1, $2, $3, $9, now(), now() + $4::bigint * interval '1 millisecond', $10,
		CASE WHEN $10 THEN $3 ELSE '' END, $11
	WHERE $8 AND NOT EXISTS (SELECT FROM ins WHERE ins.lease_id <> '' AND ins.holder = $3 AND ins.owner = $9)
		AND NOT (SELECT tree.intree FROM tree)
	ON CONFLICT (key, lease_id) DO UPDATE SET
		created_at = CASE WHEN tk.expires_at > now() AND tk.first >= excluded.first THEN tk.created_at ELSE excluded.created_at END,
		first = excluded.first, actor = excluded.actor, reason = excluded.reason, expires_at = excluded.expires_at
	WHERE tk.owner = excluded.owner
), granted AS (
	DELETE FROM ` + tk + ` WHERE key = $1 AND lease_id = $2 AND EXISTS (SELECT FROM me)
		AND EXISTS (SELECT FROM ins WHERE ins.lease_id <> '' AND ins.holder = $3 AND ins.owner = $9)
`
	} else {
		// Granted only when no live ticket is left: nobody waits.
		head, lineFree, waiters = `WITH `+snap+`, `+tree+`, ins AS (`, tryLineFreeSQL(schema), `false`
	}
	return head + `
INSERT INTO ` + t + ` AS a
	(key, lease_id, holder, owner, token, acquired_at, expires_at, ended, available_at, cooldown_ms, lock_delay_ms, metadata)
SELECT $1, $2, $3, $9, coalesce((SELECT snap.token FROM snap), nextval(` + seq + `)),
	now(), now() + $4::bigint * interval '1 millisecond', 0,
	now() + ($4::bigint + $7::bigint) * interval '1 millisecond', $6, $7, $5::jsonb
WHERE NOT (SELECT tree.intree FROM tree)
ON CONFLICT (key) DO UPDATE SET
	lease_id      = CASE WHEN a.available_at <= now() THEN excluded.lease_id ELSE a.lease_id END,
	holder        = CASE WHEN a.available_at <= now() THEN excluded.holder ELSE a.holder END,
	owner         = CASE WHEN a.available_at <= now() THEN excluded.owner ELSE a.owner END,
	token         = CASE WHEN a.available_at <= now() THEN nextval(` + seq + `) ELSE a.token END,
	acquired_at   = CASE WHEN a.available_at <= now() THEN now() ELSE a.acquired_at END,
	metadata      = CASE WHEN a.available_at <= now() THEN excluded.metadata ELSE a.metadata END,
	cooldown_ms   = CASE WHEN a.available_at <= now() THEN excluded.cooldown_ms ELSE a.cooldown_ms END,
	lock_delay_ms = CASE WHEN a.available_at <= now() THEN excluded.lock_delay_ms ELSE a.lock_delay_ms END,
	available_at  = CASE WHEN a.available_at <= now() THEN excluded.available_at
		WHEN ` + mine + `
			THEN excluded.expires_at + a.lock_delay_ms * interval '1 millisecond'
		ELSE a.available_at END,
	expires_at    = CASE WHEN a.available_at <= now() OR ` + mine + `
		THEN excluded.expires_at ELSE a.expires_at END,
	took_over     = CASE WHEN a.available_at <= now() THEN a.ended = 0 ELSE a.took_over END,
	job_id        = CASE WHEN a.available_at <= now() THEN 0 ELSE a.job_id END,
	ended         = 0,
	waiters       = CASE WHEN a.available_at <= now() THEN ` + waiters + `
		WHEN ` + mine + ` THEN a.waiters ELSE true END
WHERE NOT (SELECT tree.intree FROM tree) AND ((a.available_at <= now() AND (SELECT NOT snap.gated FROM snap) IS NOT FALSE AND ` + lineFree + `)
	OR (a.ended = 0 AND a.expires_at > now()
		AND (` + mine + ` OR ($8::boolean AND NOT a.waiters))))
RETURNING a.*
), cur AS (
	SELECT * FROM ` + t + ` WHERE key = $1 FOR SHARE
` + lineWrites + `
)
SELECT lease_id <> '' AND holder = $3 AND owner = $9, ` + leaseCols + `, ended,
	(extract(epoch FROM available_at - now()) * 1000000)::bigint, ` + live + `, false, took_over, false, false FROM ins
UNION ALL
SELECT false, ` + leaseCols + `, ended,
	(extract(epoch FROM available_at - now()) * 1000000)::bigint,
	` + live + `, available_at <= clock_timestamp(), false, available_at <= now(), (SELECT tree.intree FROM tree)
FROM cur WHERE NOT EXISTS (SELECT FROM ins)`
}
