package postgres

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// The exclusive grant of one key of a tree in one round trip. A plain exclusive request (no
// resources, no limits, not break-glass) for a key this process believes in a tree is sent as one
// batch: BEGIN, the locks of the holds' transaction (lockTreeSQL: the key's row FOR UPDATE, its
// ancestors' FOR SHARE, in byte order), one statement that decides and writes (treeOneSQL), and
// COMMIT. That statement runs after the locks, so it reads, in its own snapshot, what the last
// grant of each locked row left, as the reads of the holds' transaction do; it reads the same
// things with the same statements (the key's row, the caller's lease and place, keyLine and
// relatedSQL, for a newcomer), decides as keyRefusal and relatedRefusal do, and only then draws a
// token and writes the grant (grantHoldsCur's hold, grantRowsCur's summary row and its mark, the end of the
// caller's stale tickets). Nothing is written when it refuses.
//
// What the statement does not decide it hands back to the holds' transaction, which nothing
// here has changed: a row of the key or of an ancestor that the locks did not find (lockTreeOne
// says so in the transaction's setting baton.tree_locked; a row that appeared between the locks
// and this statement's snapshot, made by another request's first grant, is one it never
// locked, so the grant it holds may not be committed yet: deciding on it would miss that grant),
// the tree is not the one this process believed in (a stale copy), the key is
// under a rated prefix (whose rate only the holds' transaction counts; rates_scoped.go), a row of
// the key or of an ancestor is missing (the key must be made a lock key first), the caller holds
// the key already (a re-acquire renews), or has its place in the line (an earlier waiting
// attempt). A refusal of a caller that waits goes there too, to enqueue it.

// treeOne is the outcome of the statement.
type treeOne int

const (
	treeOneGranted treeOne = iota
	treeOneRefused
	treeOneHandBack // to the holds' transaction
)

// treeOneSQL decides and writes the exclusive grant of key $1 of tree $5 to lease $2 of holder
// $3 and owner $4, after the locks: $6 its ancestors, [$7, $8) its descendants, $9 the TTL in
// microseconds, $10 cooldown ms, $11 lock delay ms, $12 metadata. now is the clock read once
// by the statement (after the locks, since the statement runs after them). It returns: whether
// the holds' transaction must decide (handBack), whether granted, the token, now, the expiry,
// the rows it wrote, then the key's row, keyLine's columns and relatedSQL's, for a refusal.
func treeOneSQL(hq *holdQueries, q func(string) string) string {
	const now = `(SELECT n.now FROM n)`
	// keyLine and relatedSQL for a newcomer (no place, arrival now) asking for an exclusive hold.
	keyLine := renumber(hq.keyLine, map[int]string{1: "$1", 2: "$2", 3: now, 4: "false", 5: now, 6: "0", 7: "false", 8: now})
	related := renumber(hq.related, map[int]string{1: "$6", 2: "$7", 3: "$8", 4: now, 5: "false", 6: "$2", 7: "false",
		8: now, 9: "0", 10: now})
	reacquire := renumber(hq.reacquire, map[int]string{1: "$1", 2: "$3", 3: "$4", 4: now})
	place := renumber(hq.place, map[int]string{1: "$2", 2: now, 3: "ARRAY[$1::text]"})
	probe := renumber(q(treeProbeSQL), map[int]string{1: "$1"})
	expires := now + ` + $9::bigint * interval '1 microsecond'`
	return q(`WITH n AS MATERIALIZED (SELECT clock_timestamp() AS now),
k AS MATERIALIZED (SELECT lease_id, holder, token, expires_at, available_at, ended, job_id FROM {leases} WHERE key = $1),
c AS MATERIALIZED (SELECT
	coalesce((` + probe + `), '') IS DISTINCT FROM $5
	OR (SELECT count(*) FROM {leases} WHERE key = ANY ($6::text[] || $1::text)) <> cardinality($6::text[]) + 1
	OR EXISTS (` + reacquire + `) OR EXISTS (` + place + `) OR ` + ratedSQL("$1::text") + `
	OR NOT coalesce(nullif(current_setting('baton.tree_locked', true), ''), 'false')::boolean AS hand_back),
kl AS MATERIALIZED (SELECT * FROM (` + keyLine + `) x (ahead, front, job, smode, sholder, stoken, sexpires)),
rel AS MATERIALIZED (SELECT * FROM (` + related + `) x (hkey, hlease, hholder, htoken, hexpires, hmode, rkey, ravail,
	tn, tkey, tholder, tat, jn, jid, jres, jat)),
ok AS MATERIALIZED (SELECT NOT c.hand_back AND k.available_at <= ` + now + ` AND kl.ahead = 0 AND kl.job IS NULL
	AND rel.hkey IS NULL AND rel.rkey IS NULL AND rel.tn = 0 AND rel.jn = 0 AS ok
	FROM c, k, kl, rel),
t AS MATERIALIZED (SELECT nextval({tokenseq}) AS token FROM ok WHERE ok.ok),
g AS (INSERT INTO {holds} (lease_id, key, mode, lease_key, holder, owner, token, acquired_at, expires_at,
	ended, cooldown_ms, lock_delay_ms, metadata, slot)
SELECT $2, $1, 'exclusive', $1, $3, $4, t.token, ` + now + `, ` + expires + `, 0, $10::bigint, $11::bigint, $12::jsonb, NULL FROM t
ON CONFLICT (lease_id, key) DO UPDATE SET mode = excluded.mode, lease_key = excluded.lease_key,
	holder = excluded.holder, owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
	expires_at = excluded.expires_at, ended = 0, cooldown_ms = excluded.cooldown_ms,
	lock_delay_ms = excluded.lock_delay_ms, metadata = excluded.metadata, slot = excluded.slot
RETURNING 1),
u AS (UPDATE {leases} a SET lease_id = '', holder = $3, owner = $4, token = t.token, acquired_at = ` + now + `,
	metadata = NULL, took_over = false, job_id = 0, cooldown_ms = $10::bigint, ended = 0,
	waiters = (a.lease_id = '' AND a.job_id = 0 AND a.ended = 0 AND a.waiters) OR ` + othersWaitSQL("a.key", "$2", now) + `,
	expires_at = CASE WHEN a.lease_id = '' AND a.job_id = 0 AND a.ended = 0 THEN greatest(a.expires_at, ` + expires + `) ELSE ` + expires + ` END,
	available_at = CASE WHEN a.lease_id = '' AND a.job_id = 0 AND a.ended = 0
		THEN greatest(a.available_at, ` + expires + ` + $11::bigint * interval '1 millisecond')
		ELSE ` + expires + ` + $11::bigint * interval '1 millisecond' END,
	lock_delay_ms = CASE WHEN a.lease_id = '' AND a.job_id = 0 AND a.ended = 0 THEN greatest(a.lock_delay_ms, $11::bigint) ELSE $11::bigint END
FROM t WHERE a.key = $1 RETURNING 1),
d AS (DELETE FROM {tickets} WHERE lease_id = $2 AND key = $1 AND EXISTS (SELECT FROM t))
SELECT c.hand_back, coalesce(ok.ok, false), (SELECT t.token FROM t), ` + now + `, ` + expires + `,
	(SELECT count(*) FROM g) + (SELECT count(*) FROM u),
	k.lease_id, k.holder, k.token, k.expires_at, k.available_at, k.ended, k.job_id,
	kl.ahead, kl.front, kl.job, kl.smode, kl.sholder, kl.stoken, kl.sexpires,
	rel.hkey, rel.hlease, rel.hholder, rel.htoken, rel.hexpires, rel.hmode, rel.rkey, rel.ravail,
	rel.tn, rel.tkey, rel.tholder, rel.tat, rel.jn, rel.jid, rel.jres, rel.jat
FROM c LEFT JOIN k ON true LEFT JOIN kl ON true LEFT JOIN rel ON true LEFT JOIN ok ON true`)
}

var paramRE = regexp.MustCompile(`\$([0-9]+)\b`)

// renumber replaces the parameters of sql by the expressions of to, all at once; it panics on a
// parameter to does not name (a statement built wrong at open).
func renumber(sql string, to map[int]string) string {
	return paramRE.ReplaceAllStringFunc(sql, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		e, ok := to[n]
		if !ok {
			panic("postgres: renumber: no expression for " + m + " in " + strings.SplitN(sql, "\n", 2)[0])
		}
		if strings.HasPrefix(e, "$") || !strings.ContainsAny(e, " (") {
			return e
		}
		return "(" + e + ")"
	})
}

// acquireTreeOne runs the one-round-trip grant of p (an exclusive request for key p.Key of the
// tree of prefix, as this process believes). It returns the lease, or the refusal, or handBack.
func (s *Store) acquireTreeOne(ctx context.Context, p *store.AcquireParams, prefix string, md any) (*store.Lease, treeOne, error) {
	if err := store.ValidateTreeKey("key", p.Key, prefix); err != nil {
		return nil, treeOneRefused, err
	}
	ancestors := store.TreeAncestors(p.Key, prefix)
	if ancestors == nil {
		ancestors = []string{} // the root's: none, not NULL
	}
	lo, hi := store.DescendantRange(p.Key)
	var (
		handBack, granted bool
		token             *int64
		now, expires      time.Time
		wrote             int
		row               struct {
			leaseID, holder *string
			token           *int64
			expires, avail  *time.Time
			ended           *int16
			jobID           *int64
		}
		kl             keyLineRead
		smode, sholder *string
		stoken         *int64
		sexpires       *time.Time
		rel            relatedRead
	)
	err := s.pipeGrant(ctx, p.Key, func(pt *pipeTx) error {
		return pt.batch(ctx, func(b *pgx.Batch) {
			b.Queue(s.hq.lockTreeOne, []string{p.Key})
			b.Queue(s.hq.treeOne, p.Key, p.LeaseID, p.Holder, p.Owner, prefix, ancestors, lo, hi,
				p.TTL.Microseconds(), p.Cooldown.Milliseconds(), p.LockDelay.Milliseconds(), md)
		}, true, func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return err
			}
			return br.QueryRow().Scan(&handBack, &granted, &token, &now, &expires, &wrote,
				&row.leaseID, &row.holder, &row.token, &row.expires, &row.avail, &row.ended, &row.jobID,
				&kl.ahead, &kl.front, &kl.job, &smode, &sholder, &stoken, &sexpires,
				&rel.holdKey, &rel.holdLease, &rel.holdHolder, &rel.holdToken, &rel.holdExpires, &rel.holdMode,
				&rel.restKey, &rel.restUntil, &rel.tickets, &rel.ticketKey, &rel.ticketHolder, &rel.ticketAt,
				&rel.jobs, &rel.jobID, &rel.jobResource, &rel.jobAt)
		})
	})
	switch {
	case err != nil:
		var pgErr *pgconn.PgError
		// Class 22 is a data exception: valid JSON that jsonb cannot hold (see Acquire).
		if md != nil && errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22" {
			return nil, treeOneRefused, &store.InvalidArgumentError{Field: "metadata",
				Rule: "must be storable as PostgreSQL jsonb (" + pgErr.Message + ")"}
		}
		return nil, treeOneRefused, s.holdErr("acquire", p.Key, err)
	case handBack:
		return nil, treeOneHandBack, nil
	case granted:
		if wrote != 2 || token == nil {
			return nil, treeOneRefused, s.fail("acquire", p.Key, errors.New("the tree grant wrote "+itoa(wrote)+" rows, not 2"))
		}
		return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Owner: p.Owner, Token: uint64(*token),
			AcquiredAt: now, ExpiresAt: expires, TTLLeft: p.TTL, Metadata: p.Metadata}, treeOneGranted, nil
	}
	// Refused: say why as the holds' transaction would.
	r := &keyRow{leaseID: *row.leaseID, holder: *row.holder, token: *row.token, expiresAt: *row.expires,
		availableAt: *row.avail, ended: *row.ended, jobID: *row.jobID}
	if smode != nil {
		kl.sum = &holdSummary{mode: *smode, holder: *sholder, token: *stoken, expires: *sexpires}
	}
	if refusal := keyRefusal(p, p.Key, r, now, kl.sum, kl); refusal != nil {
		return nil, treeOneRefused, refusal
	}
	if refusal := relatedRefusal(p, p.Key, now, &rel); refusal != nil {
		return nil, treeOneRefused, refusal
	}
	return nil, treeOneRefused, s.fail("acquire", p.Key, errors.New("the tree grant refused a request nothing refuses"))
}

// isRefusal reports whether err refuses a grant for now (a holder, the line or a rest), which a
// caller that waits is enqueued after.
func isRefusal(err error) bool {
	return errors.As(err, new(*store.LockHeldError)) || errors.As(err, new(*store.RestingError))
}

// treeReleaseSQL is the release of a lease made of holds ($1 lease_id, $2 lease_key, $3 owner)
// whose key is in a tree, as one statement after the locks of releaseHolds (lockTreeOf): what
// its batch does in seven statements, each reading what the ones before it wrote, it does
// with the rows the end of the holds returns (e): the summary rows of their keys, from the
// other holds of each key (every hold of a key but the lease's own, which just ended: one per
// lease and key); the wakes of their lines and of their keys' jobs, and of the lines related
// to them in the tree; and how many holds of the lease had ended before, for a release that
// ended none. It returns now, the holds ended, their acquisition, the payloads NOTIFYed, and
// that count.
func treeReleaseSQL(hq *holdQueries, q func(string) string) string {
	const now = `(SELECT n.now FROM n)`
	ended := `ARRAY(SELECT e.key FROM e ORDER BY e.key)`
	keys := `ARRAY(SELECT e.key FROM e WHERE e.mode <> 'unit')`
	lines := `(SELECT rl.lines FROM rl)`
	wake := renumber(hq.wake, map[int]string{1: ended, 2: now, 3: "true"})
	notifyJobs := renumber(hq.notifyJobs, map[int]string{1: keys})
	relatedWake := renumber(hq.wake, map[int]string{1: lines, 2: now, 3: "false"})
	relatedJobs := renumber(hq.notifyJobs, map[int]string{1: lines})
	countEnded := renumber(hq.countEnded, map[int]string{1: "$1", 2: "$2", 3: "$3"})
	return q(`WITH n AS MATERIALIZED (SELECT clock_timestamp() AS now),
e AS (UPDATE {holds} SET ended = 1, expires_at = least(expires_at, ` + now + `)
	WHERE lease_id = $1 AND lease_key = $2 AND owner = $3 AND ended = 0 AND expires_at > ` + now + `
	RETURNING key, mode, acquired_at, cooldown_ms),
h AS (
	SELECT e.key, e.cooldown_ms, max(x.expires_at) FILTER (WHERE x.expires_at > ` + now + `) AS live,
		max(x.expires_at + x.lock_delay_ms * interval '1 millisecond') AS delay
	FROM e LEFT JOIN {holds} x ON x.key = e.key AND x.ended = 0 AND x.lease_id <> $1
	WHERE e.mode <> 'unit'
	GROUP BY e.key, e.cooldown_ms
),
s AS (UPDATE {leases} l SET expires_at = coalesce(h.live, least(l.expires_at, ` + now + `)),
	ended = CASE WHEN h.live IS NULL THEN 1 ELSE 0 END,
	cooldown_ms = CASE WHEN h.live IS NULL THEN h.cooldown_ms ELSE l.cooldown_ms END,
	available_at = greatest(` + now + ` + h.cooldown_ms * interval '1 millisecond', coalesce(h.delay, '-infinity'))
FROM h WHERE l.key = h.key AND l.lease_id = '' AND l.job_id = 0 AND l.ended = 0 RETURNING 1),
w AS MATERIALIZED (SELECT x.payload FROM (` + wake + `) x),
j AS MATERIALIZED (SELECT 1 FROM (` + notifyJobs + `) x),
rl AS MATERIALIZED (SELECT ARRAY(SELECT x.key FROM (` + relatedLinesSQL(keys, now) + `) x ORDER BY x.key COLLATE "C") AS lines),
rw AS MATERIALIZED (SELECT x.payload FROM (` + relatedWake + `) x),
rj AS MATERIALIZED (SELECT 1 FROM (` + relatedJobs + `) x)
SELECT ` + now + `, (SELECT count(*) FROM e), (SELECT max(e.acquired_at) FROM e),
	ARRAY(SELECT w.payload FROM w) || ARRAY(SELECT rw.payload FROM rw),
	(SELECT count(*) FROM s) + (SELECT count(*) FROM j) + (SELECT count(*) FROM rj),
	(` + countEnded + `)`)
}

// releaseTreeOne is releaseHolds for a lease whose key is in a tree: one round trip of BEGIN,
// the locks (lockTreeOf), treeReleaseSQL and COMMIT.
func (s *Store) releaseTreeOne(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	var res *store.ReleaseResult
	var woken []string
	err := s.pipeRun(ctx, func(pt *pipeTx) error {
		res, woken = nil, nil
		var (
			now            time.Time
			acquired       *time.Time
			n, released    int
			settledOrWoken int
		)
		err := pt.batch(ctx, func(b *pgx.Batch) {
			b.Queue(s.hq.lockTreeOf, p.LeaseID, p.Key, p.Owner)
			b.Queue(s.hq.treeRelease, p.LeaseID, p.Key, p.Owner)
		}, true, func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return err
			}
			return br.QueryRow().Scan(&now, &n, &acquired, &woken, &settledOrWoken, &released)
		})
		switch {
		case err != nil:
			return err
		case n > 0:
			res = &store.ReleaseResult{Held: now.Sub(*acquired)}
		case released == 0:
			return store.ErrNotHeld // nothing was written
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
