package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// Kind rates (store/rate.go). The claim statement takes only kinds without a rate; a head of a
// kind with one is claimed here, one transaction per job: a transaction-scoped advisory lock on
// its rate key (the kind and the resource) serialises every grant that key counts, the grants
// are read after the lock is taken (READ COMMITTED: a fresh snapshot per statement, so every
// grant committed before it counts), and the job is started by the claim statement narrowed to
// it, its grant recorded in the same transaction. The grant's time is the transaction's start,
// now(), which is also the attempt's attempted_at; a grant counts every recorded grant after its
// time less the window, later ones included, so no window ever holds more than the rate's Max
// whatever order the transactions started in. Kinds without a rate never take the lock or read
// the table; their claims only gain the filter of their kinds on rate_max.

// rateQueries are the statements of rates, built once at open.
type rateQueries struct {
	heads, lock, grants, record, recordAt, wait, line string
}

// claimRatedSQL is the claim statement for one head ($7) of kinds $1, whatever their rate.
var claimRatedSQL = strings.Replace(strings.Replace(claimSQL,
	`unnest(ARRAY(SELECT name FROM {kinds} WHERE name = ANY ($1::text[]) AND rate_max = 0)) AS kk (kind)`,
	`unnest($1::text[]) AS kk (kind)`, 1),
	`WHERE j.kind = kk.kind AND j.head`, `WHERE j.id = $7::bigint AND j.kind = kk.kind AND j.head`, 1)

func buildRateQueries(q func(string) string) rateQueries {
	return rateQueries{
		// $1 kinds, $2 limit: the claimable heads without holds of kinds with a rate, in claim
		// order (no rows, at the cost of a probe of the kinds, when none of $1 has a rate).
		heads: q(`SELECT j.id, j.kind, j.resource, k.rate_max, k.rate_window_ms
FROM {kinds} k CROSS JOIN LATERAL (
	SELECT j.id, j.kind, j.resource, j.priority, j.seq FROM {jobs} j
	WHERE j.kind = k.name AND NOT j.holds AND j.head AND j.state IN ('scheduled', 'available', 'retryable')
		AND j.scheduled_at <= now()
	ORDER BY j.priority, j.seq LIMIT $2
) j
WHERE k.name = ANY ($1::text[]) AND k.rate_max > 0
ORDER BY j.priority, j.seq LIMIT $2`),
		// $1 scope, $2 key. The schema's table name keeps the stores of two schemas apart.
		lock: q(`SELECT pg_advisory_xact_lock(hashtextextended('{rate_grants}' || E'\x1f' || $1::text || E'\x1f' || $2::text, 0))`),
		// $1 scope, $2 key, $3 window ms: the grants in the window, and the transaction's now.
		grants: q(`SELECT coalesce(array_agg(g.at ORDER BY g.at), '{}'), now() FROM {rate_grants} g
WHERE g.scope = $1 AND g.key = $2 AND g.at > now() - $3::bigint * interval '1 millisecond'`),
		// $1 scope, $2 key, $3 window ms: a grant now, and the key's grants out of the window gone.
		record: q(`WITH old AS (
	DELETE FROM {rate_grants} WHERE scope = $1 AND key = $2 AND at <= now() - $3::bigint * interval '1 millisecond'
)
INSERT INTO {rate_grants} (scope, key, at) VALUES ($1, $2, now())`),
		// record with the grant's time $4 (a job with holds: its attempt's start).
		recordAt: q(`WITH old AS (
	DELETE FROM {rate_grants} WHERE scope = $1 AND key = $2 AND at <= $4::timestamptz - $3::bigint * interval '1 millisecond'
)
INSERT INTO {rate_grants} (scope, key, at) VALUES ($1, $2, $4)`),
		// $1 id, $2 when the window frees: the head waits until then.
		wait: q(`UPDATE {jobs} j SET scheduled_at = greatest(j.scheduled_at, $2),
	state = CASE WHEN j.state = 'available' THEN 'scheduled' ELSE j.state END
WHERE j.id = $1 AND j.head AND j.state IN ('scheduled', 'available', 'retryable')`),
		// $1 key: the rates of kinds with grants on it in their window, and now.
		line: q(`SELECT k.name, k.rate_max, k.rate_window_ms, array_agg(g.at ORDER BY g.at), now()
FROM {kinds} k JOIN {rate_grants} g ON g.scope = 'kind:' || k.name AND g.key = $1
WHERE k.rate_max > 0 AND g.at > now() - k.rate_window_ms * interval '1 millisecond'
GROUP BY k.name, k.rate_max, k.rate_window_ms ORDER BY k.name`),
	}
}

// ratedHead is a claimable head of a kind with a rate.
type ratedHead struct {
	id             int64
	kind, resource string
	rate           store.Rate
}

// queueRatedHeads queues, in a claim's batch, the read of up to limit claimable heads of p's
// kinds that have a rate.
func (s *Store) queueRatedHeads(b *pgx.Batch, kinds []string, limit int, out *[]*ratedHead) {
	b.Queue(s.jq.rates.heads, kinds, limit).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			h := &ratedHead{}
			var windowMS int64
			if err := rows.Scan(&h.id, &h.kind, &h.resource, &h.rate.Max, &windowMS); err != nil {
				return err
			}
			h.rate.Window = time.Duration(windowMS) * time.Millisecond
			*out = append(*out, h)
		}
		return rows.Err()
	})
}

// claimRated starts heads of rated kinds, up to room, each in its own transaction.
func (s *Store) claimRated(ctx context.Context, p *store.ClaimParams, room int, heads []*ratedHead) ([]*store.Job, error) {
	var out []*store.Job
	for _, h := range heads {
		if len(out) >= room {
			break
		}
		j, err := s.claimRatedJob(ctx, p, h)
		if err != nil {
			return out, s.jobErr("claim jobs", err)
		}
		if j != nil {
			out = append(out, j)
		}
	}
	return out, nil
}

// claimRatedJob starts head h if its rate allows, recording the grant; else postpones it until
// the window frees. Nil if it did not start (postponed, claimed meanwhile, refused by its guard
// or by a lease on its key).
func (s *Store) claimRatedJob(ctx context.Context, p *store.ClaimParams, h *ratedHead) (*store.Job, error) {
	scope := store.KindRateScope(h.kind)
	window := h.rate.Window.Milliseconds()
	var started *store.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.jq.rates.lock, scope, h.resource); err != nil {
			return err
		}
		var grants []time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, s.jq.rates.grants, scope, h.resource, window).Scan(&grants, &now); err != nil {
			return err
		}
		if next, reached := store.RateNext(h.rate, grants, now); reached {
			_, err := tx.Exec(ctx, s.jq.rates.wait, h.id, next)
			return err
		}
		rows, err := tx.Query(ctx, s.jq.claimRated, []string{h.kind}, 1, p.Worker, p.TTL.Milliseconds(), p.Owner, true, h.id)
		if err != nil {
			return err
		}
		js, err := collectJobs(rows)
		if err != nil {
			return err
		}
		if len(js) == 1 {
			started = js[0]
			if _, err := tx.Exec(ctx, s.jq.rates.record, scope, h.resource, window); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, s.jq.lockRejected); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.jq.promoteRejected)
		return err
	})
	return started, err
}

// rateReached says whether kind's rate is reached on resource now (a submit's skip policy: no
// lock, the claim decides).
func (s *Store) rateReached(ctx context.Context, q querier, kind *store.Kind, resource string) (time.Time, bool, error) {
	var grants []time.Time
	var now time.Time
	err := q.QueryRow(ctx, s.jq.rates.grants, store.KindRateScope(kind.Name), resource, kind.Rate.Window.Milliseconds()).Scan(&grants, &now)
	if err != nil {
		return time.Time{}, false, err
	}
	next, reached := store.RateNext(*kind.Rate, grants, now)
	return next, reached, nil
}

// lineRates reads the kinds' rates reached on key (ResourceLine).
func (s *Store) lineRates(ctx context.Context, tx pgx.Tx, key string) ([]*store.RateWait, error) {
	rows, err := tx.Query(ctx, s.jq.rates.line, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.RateWait
	for rows.Next() {
		var name string
		var r store.Rate
		var windowMS int64
		var grants []time.Time
		var now time.Time
		if err := rows.Scan(&name, &r.Max, &windowMS, &grants, &now); err != nil {
			return nil, err
		}
		r.Window = time.Duration(windowMS) * time.Millisecond
		if next, ok := store.RateNext(r, grants, now); ok {
			out = append(out, &store.RateWait{Kind: name, Rate: r, Next: next})
		}
	}
	return out, rows.Err()
}

// rateReachedError: a job's rate is reached; it waits until next.
type rateReachedError struct{ next time.Time }

func (e *rateReachedError) Error() string { return "rate reached until " + e.next.String() }

// queueRateCheck queues, first in a grant's transaction, the lock of j's rate key and the read
// of its grants (a statement after the lock: its snapshot sees every grant committed before).
// The grant's time, recorded later in the transaction, is at or after this read's now(), so the
// grants it counts include every grant its window could hold.
func (s *Store) queueRateCheck(b *pgx.Batch, j *store.Job, r *store.Rate) {
	scope := store.KindRateScope(j.Kind)
	b.Queue(s.jq.rates.lock, scope, j.Resource)
	b.Queue(s.jq.rates.grants, scope, j.Resource, r.Window.Milliseconds())
}

// readRateCheck reads what queueRateCheck queued: a *rateReachedError if the rate is reached.
func readRateCheck(br pgx.BatchResults, r *store.Rate) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	var grants []time.Time
	var now time.Time
	if err := br.QueryRow().Scan(&grants, &now); err != nil {
		return err
	}
	if next, reached := store.RateNext(*r, grants, now); reached {
		return &rateReachedError{next: next}
	}
	return nil
}
