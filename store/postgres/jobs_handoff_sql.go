package postgres

import "strings"

// promoteClaimSQL is promoteMany for a completion that a claim follows in the same round trip
// (CompleteJobsAndClaim): it promotes the next job of each resource whose job was completed
// ($1 the completed jobs' ids) and starts at once, for worker $4 with a lease of $5 ms, up to $3
// of those successors that the claim would take anyway: of a kind in $2, unguarded (a guarded
// kind's state check is the claim's), due once the cooldowns are applied, and with no claimable
// head of its kind at a better priority waiting elsewhere. The others are promoted as promote
// does (and NOTIFY). It returns the jobs it started.
//
// One row update instead of two: promotion (head = true) then a claim (state = 'running') each
// wrote a new version of the successor's row and its index entries; at two jobs per resource
// that was half the jobs of a drain. Priority still orders claims across resources (the
// NOT EXISTS probe of the claimable-heads index); among equal priorities a resource's next job
// goes to the worker that finished its previous one, ahead of older heads of other resources,
// which the worker's other slots and the other workers claim as before. At most one job runs
// per resource whatever the order, so no resource can hold more than one of its slots.
//
// The statement runs after completeMany, which locked the completed jobs' resource rows, for the
// reason given at promote. A successor's state and head are read in that snapshot; every other
// change to a queued job (submit, cancel, retry) takes its resource's row lock first.
const promoteClaimSQL = `WITH nxt AS (
	SELECT x.id
	FROM (SELECT DISTINCT s.resource FROM {jobs} s WHERE s.id = ANY($1)) rs CROSS JOIN LATERAL (
		SELECT u.id FROM {jobs} u
		WHERE u.resource = rs.resource AND u.state IN ` + unfinished + `
		ORDER BY u.seq
		LIMIT 1
	) x
), cand AS (
	SELECT u.id, u.kind, u.priority, u.seq, k.timeout_ms,
		greatest(u.scheduled_at, coalesce((r.cooldowns ->> u.kind)::timestamptz, '-infinity'),
			coalesce(r.cooldown_until, '-infinity')) AS at,
		u.kind = ANY($2::text[]) AND u.state IN ('scheduled', 'available', 'retryable')
			AND cardinality(k.from_states) = 0 AND k.running_state = '' AS claimable
	FROM nxt JOIN {jobs} u ON u.id = nxt.id JOIN {resources} r ON r.key = u.resource
		JOIN {kinds} k ON k.name = u.kind
	WHERE NOT u.head
), pick AS (
	SELECT c.id FROM cand c
	WHERE c.claimable AND c.at <= now() AND NOT EXISTS (
		SELECT 1 FROM {jobs} h
		WHERE h.kind = c.kind AND h.head AND h.state IN ('scheduled', 'available', 'retryable')
			AND h.priority < c.priority AND h.scheduled_at <= now())
	ORDER BY c.priority, c.seq
	LIMIT $3
), p AS (
	UPDATE {jobs} j SET head = true, scheduled_at = c.at,
		state = CASE WHEN pk.id IS NULL THEN j.state ELSE 'running' END,
		attempt = CASE WHEN pk.id IS NULL THEN j.attempt ELSE j.attempt + 1 END,
		attempted_at = CASE WHEN pk.id IS NULL THEN j.attempted_at ELSE now() END,
		worker = CASE WHEN pk.id IS NULL THEN j.worker ELSE $4 END,
		token = CASE WHEN pk.id IS NULL THEN j.token ELSE nextval({token_seq}) END,
		lease_expires_at = CASE WHEN pk.id IS NULL THEN j.lease_expires_at
			ELSE now() + $5::bigint * interval '1 millisecond' END,
		timeout_ms = CASE WHEN pk.id IS NULL THEN j.timeout_ms ELSE c.timeout_ms END,
		cancel_requested = CASE WHEN pk.id IS NULL THEN j.cancel_requested ELSE false END
	FROM cand c LEFT JOIN pick pk ON pk.id = c.id
	WHERE j.id = c.id AND NOT j.head
	RETURNING j.*, pk.id IS NOT NULL AS direct
), n AS (
	SELECT pg_notify({channel}, {jobkey} || p.kind)
	FROM p JOIN {kinds} k ON k.name = p.kind
	WHERE NOT p.direct AND k.waiting_until > now() AND p.scheduled_at <= now()
)
SELECT ` + jobCols + ` FROM p j WHERE j.direct AND (SELECT count(*) FROM n) >= 0`

// claimAfterHandoffSQL is claimSQL for the same round trip, after promoteClaimSQL: its limit is
// $2 less the jobs that statement started for worker $3 (in this transaction: attempted now(),
// with this lease's expiry, found through jobs_running_by_lease).
var claimAfterHandoffSQL = strings.ReplaceAll(claimSQL, "LIMIT $2", `LIMIT (SELECT greatest($2 - count(*), 0)
		FROM {jobs} d WHERE d.state = 'running' AND d.lease_expires_at = now() + $4::bigint * interval '1 millisecond'
			AND d.worker = $3 AND d.attempted_at = now())`)
