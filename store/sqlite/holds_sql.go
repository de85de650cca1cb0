package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// The statements of holds.go and limits.go, prepared once per Store (prepareHolds): a grant
// beyond one key runs a dozen of them in its transaction, and preparing each anew costs more
// than running it. Lists of keys are passed as one JSON array (json_each).

var (
	sqlLimitCapacity = hq(`SELECT capacity FROM limits WHERE name = ?1`)
	sqlKeyHolds      = hq(`SELECT mode, holder, token, expires_at FROM holds
			WHERE key = ?1 AND ended = 0 AND expires_at > ?2 ORDER BY mode = 'exclusive' DESC, expires_at LIMIT 1`)
	// The ready head jobs of resource ?1 at ?2 submitted by ?3, but job ?4 (the caller, if a job);
	// for a shared request (?5 = 1), every exclusive one, head or not: an exclusive job waiting
	// behind running shared jobs is no head yet, and later shared requests must not overtake it.
	sqlJobsAhead = hq(`SELECT count(*), min(id) FROM jobs WHERE resource = ?1 AND (head OR ?5) AND state IN ` + sqlClaimable + `
		AND scheduled_at <= ?2 AND created_at <= ?3 AND id <> ?4
		AND NOT (?5 AND beyond IS NOT NULL AND json_extract(beyond, '$.shared'))`)
	sqlLimitUse = hq(`SELECT count(*), min(expires_at),
			(SELECT holder FROM holds WHERE key = ?1 AND ended = 0 AND expires_at > ?3 ORDER BY expires_at LIMIT 1),
			(SELECT count(*) ` + beforeMeSQL + `)
		FROM holds WHERE key = ?1 AND ended = 0 AND expires_at > ?3`)
	sqlEnqueueTicket = hq(`INSERT INTO tickets (key, lease_id, holder, owner, created_at, expires_at, first, actor,
				reason, seq, mode, lease_key)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, '', '', ?7, ?8, ?9)`)
	sqlGrantHold = hq(`INSERT INTO holds (lease_id, key, mode, lease_key, holder, owner, token, acquired_at,
				expires_at, ended, cooldown_ns, lock_delay_ns, metadata)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12)
			ON CONFLICT (lease_id, key) DO UPDATE SET mode = excluded.mode, lease_key = excluded.lease_key,
				holder = excluded.holder, owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
				expires_at = excluded.expires_at, ended = 0, cooldown_ns = excluded.cooldown_ns,
				lock_delay_ns = excluded.lock_delay_ns, metadata = excluded.metadata`)
	// A unit of limit line ?2 (mode 'unit'), in the lowest slot no live unit of the limit holds at
	// ?8; the other arguments as sqlGrantHold's. It returns the slot.
	sqlGrantUnit = hq(`INSERT INTO holds (lease_id, key, mode, lease_key, holder, owner, token, acquired_at,
				expires_at, ended, cooldown_ns, lock_delay_ns, metadata, slot)
			VALUES (?1, ?2, 'unit', ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?10, NULL, coalesce(
				(SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM holds WHERE key = ?2 AND slot = 0 AND ended = 0 AND expires_at > ?7)),
				(SELECT min(h.slot) + 1 FROM holds h WHERE h.key = ?2 AND h.slot IS NOT NULL AND h.ended = 0 AND h.expires_at > ?7
					AND NOT EXISTS (SELECT 1 FROM holds g WHERE g.key = ?2 AND g.slot = h.slot + 1 AND g.ended = 0 AND g.expires_at > ?7))))
			ON CONFLICT (lease_id, key) DO UPDATE SET mode = excluded.mode, lease_key = excluded.lease_key,
				holder = excluded.holder, owner = excluded.owner, token = excluded.token, acquired_at = excluded.acquired_at,
				expires_at = excluded.expires_at, ended = 0, cooldown_ns = excluded.cooldown_ns,
				lock_delay_ns = excluded.lock_delay_ns, metadata = NULL, slot = excluded.slot
			RETURNING slot`)
	sqlSummarise = hq(`INSERT INTO leases AS a (key, lease_id, holder, owner, token, acquired_at, expires_at,
				ended, available_at, cooldown_ns, lock_delay_ns, tree)
			VALUES (?1, '', ?2, ?3, ?4, ?5, ?6, 0, ?6 + ?7, ?8, ?7, ?9)
			ON CONFLICT (key) DO UPDATE SET lease_id = '', holder = excluded.holder, owner = excluded.owner, tree = excluded.tree,
				token = excluded.token, acquired_at = excluded.acquired_at, metadata = NULL, took_over = 0,
				expires_at = iif(a.lease_id = '' AND a.ended = 0, max(a.expires_at, excluded.expires_at), excluded.expires_at),
				available_at = iif(a.lease_id = '' AND a.ended = 0, max(a.available_at, excluded.available_at), excluded.available_at),
				lock_delay_ns = iif(a.lease_id = '' AND a.ended = 0, max(a.lock_delay_ns, excluded.lock_delay_ns), excluded.lock_delay_ns),
				cooldown_ns = excluded.cooldown_ns, ended = 0`)
	sqlMyHolds = hq(`SELECT lease_id FROM holds WHERE key = ?1 AND lease_key = ?1 AND holder = ?2 AND owner = ?3
		AND ended = 0 AND expires_at > ?4 LIMIT 1`)
	sqlRenewHolds = hq(`UPDATE holds SET expires_at = ?4
		WHERE lease_id = ?1 AND lease_key = ?2 AND owner = ?3 AND ended = 0 AND expires_at > ?5
		RETURNING key, mode, holder, token, acquired_at, metadata, slot`)
	sqlReleaseHolds = hq(`UPDATE holds SET ended = 1, expires_at = min(expires_at, ?4)
			WHERE lease_id = ?1 AND lease_key = ?2 AND owner = ?3 AND ended = 0 AND expires_at > ?4
			RETURNING key, mode, acquired_at, cooldown_ns`)
	sqlReleasedHolds = hq(`SELECT count(*) FROM holds WHERE lease_id = ?1 AND lease_key = ?2 AND owner = ?3
				AND ended = 1`)
	sqlSettleRead = hq(`SELECT max(iif(expires_at > ?2, expires_at, NULL)), max(expires_at + lock_delay_ns)
		FROM holds WHERE key = ?1 AND ended = 0`)
	sqlSettleHeld = hq(`UPDATE leases SET expires_at = ?2, available_at = max(?3, ?4)
			WHERE key = ?1 AND lease_id = '' AND ended = 0`)
	sqlSettleFree = hq(`UPDATE leases SET ended = 1, expires_at = min(expires_at, ?2), cooldown_ns = ?3,
			available_at = max(?2 + ?3, coalesce(?4, 0))
		WHERE key = ?1 AND lease_id = '' AND ended = 0`)
	sqlForceHolds = hq(`UPDATE holds SET ended = 2, expires_at = min(expires_at, ?2)
		WHERE ended = 0 AND expires_at > ?2 AND lease_id IN (SELECT lease_id FROM holds WHERE key = ?1 AND ended = 0 AND expires_at > ?2)
		RETURNING key, mode`)
	sqlDrawToken = hq(`UPDATE counters SET value = value + 1 WHERE name = 'token' RETURNING value`)
)

var (
	// ?1 lease_id, ?2 now, ?3 the lines (JSON).
	sqlMyPlace = hq(`SELECT created_at, seq FROM tickets WHERE lease_id = ?1 AND expires_at > ?2
		AND key IN (SELECT value FROM json_each(?3))`)
	// ?1 expires_at, ?2 lease_id, ?3 owner, ?4 the lines (JSON).
	sqlKeepTickets = hq(`UPDATE tickets SET expires_at = ?1 WHERE lease_id = ?2 AND owner = ?3
		AND key IN (SELECT value FROM json_each(?4))`)
	// ?1 lease_id, ?2 the lines (JSON).
	sqlEndTickets = hq(`DELETE FROM tickets WHERE lease_id = ?1 AND key IN (SELECT value FROM json_each(?2))`)
	// ?1 the lines (JSON).
	sqlNextSeq = hq(`SELECT coalesce(max(seq), 0) + 1 FROM tickets WHERE key IN (SELECT value FROM json_each(?1))`)
	// ?1 expires_at, ?2 the keys (JSON).
	sqlRenewSummaries = hq(`UPDATE leases SET expires_at = max(expires_at, ?1), available_at = max(available_at, ?1 + lock_delay_ns)
		WHERE lease_id = '' AND ended = 0 AND key IN (SELECT value FROM json_each(?2))`)
	// The tickets before the caller in key ?1's line that hold it up, and the first of them: every
	// one for an exclusive request, the exclusive ones for a shared request. See beforeMeSQL.
	sqlAheadExclusive = hq(`SELECT count(*), (SELECT t.holder ` + beforeMeSQL + ` ORDER BY t.first DESC, t.created_at, t.seq LIMIT 1) ` +
		beforeMeSQL)
	sqlAheadShared = hq(`SELECT count(*), (SELECT t.holder ` + beforeMeSQL + ` AND t.mode = 'exclusive'
		ORDER BY t.first DESC, t.created_at, t.seq LIMIT 1) ` + beforeMeSQL + ` AND t.mode = 'exclusive'`)
)

// sqlKeyHolders reads key ?1's live holds at ?2, at most ?3, in token order.
var sqlKeyHolders = hq(`SELECT lease_id, mode, holder, owner, token, acquired_at, expires_at FROM holds
	WHERE key = ?1 AND ended = 0 AND expires_at > ?2 ORDER BY token LIMIT ?3`)

// holdQueries are the statements hq registered, prepared by prepareHolds.
var holdQueries []string

// hq registers a statement of the holds to be prepared once per Store.
func hq(q string) string {
	holdQueries = append(holdQueries, q)
	return q
}

// prepareHolds prepares the registered statements on the store's connection.
func (s *Store) prepareHolds(ctx context.Context) error {
	s.holdStmts = make(map[string]*sql.Stmt, len(holdQueries))
	for _, q := range holdQueries {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.holdStmts[q] = st
	}
	return nil
}

// hq returns the prepared statement q inside tx. An unregistered q is a bug of this package.
func (s *Store) hq(ctx context.Context, tx *sql.Tx, q string) *sql.Stmt {
	st, ok := s.holdStmts[q]
	if !ok {
		panic("sqlite: statement not registered with hq: " + q)
	}
	return tx.StmtContext(ctx, st)
}

// jsonList encodes keys as a JSON array, the one argument of a json_each list.
func jsonList(keys []string) string {
	b, _ := json.Marshal(keys)
	return string(b)
}
