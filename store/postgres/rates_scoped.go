package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// Rates of limits and of key prefixes (store.Limit.Rate, store.RatePrefixer,
// migrations/0021_more_rates.sql).
//
// Every grant that counts in one is made through holds (holds.go): a request that names limits
// always is; a key under a rated prefix is refused by the plain acquire statement (its CTE tree
// probes the rated prefixes as it probes the trees) and a job on one is submitted with holds.
// The store keeps the rated prefixes in memory to route keys without a round trip
// (store.RatePrefixCache); a stale copy costs one refused statement and a reload.
//
// The grant's transaction reads the rates it counts in (in its first batch, after the locks of
// its keys and limits), and once nothing else refuses it, takes a transaction-scoped advisory
// lock on each rate's counter in scope order, reads the counter's grants after the lock (READ
// COMMITTED: every grant committed before counts), and refuses if one is reached (a lease: a
// rest of ReasonRate; a job: it waits as its head until the window frees, as for a kind's rate),
// else records a grant in each at the grant's instant before it commits. As for kind rates, a
// grant counts every recorded grant after its instant less the window, later ones included, so no
// window ever holds more than Max whatever order the transactions started in. The advisory locks
// are taken last, after every row lock of the grant, and in one order, so they add no cycle.
//
// SetPrefixRate takes the rated prefixes' table in ACCESS EXCLUSIVE mode (as SetTree does the
// trees'): it waits for the grants and submits in flight that read it, and every one after it
// sees it. In the same transaction it marks the queued jobs on keys under the prefix that have
// no holds as jobs with holds, so that the pipelined claim (which reads no rate) never starts one.

// scopedQueries are the statements of limits' and prefixes' rates.
type scopedQueries struct {
	// $1 keys, $2 limits: the rates a grant of them counts in, in scope order.
	rates string
	// $1 scope, $2 window ms, $3 now: the counter's grants in the window ending at now.
	grantsAt string
	// $1 scope: a deleted limit's or prefix's counter.
	forget string
	// $1 key: whether it is under a rated prefix.
	under string
	// Rated prefixes: all, a page ($1 after, $2 limit), upsert ($1 prefix, $2 max, $3 window
	// ms), delete ($1), the table's lock, the queued jobs under $1 without holds made jobs with
	// holds, and the audit of a set or a delete.
	all, list, upsert, remove, lockTable, convert, audit string
}

func buildScopedQueries(q func(string) string) scopedQueries {
	return scopedQueries{
		// One JSON text (database/sql's driver, for a submit in the caller's *sql.Tx, scans no
		// arrays of integers).
		rates: q(`SELECT coalesce(json_agg(json_build_array(r.scope, r.lim, r.prefix, r.rate_max, r.rate_window_ms) ORDER BY r.scope), '[]')::text FROM (
	SELECT 'limit:' || l.name AS scope, l.name AS lim, '' AS prefix, l.rate_max, l.rate_window_ms
	FROM {limits} l WHERE l.name = ANY ($2::text[]) AND l.rate_max > 0
	UNION
	SELECT 'prefix:' || x.prefix, '', x.prefix, x.rate_max, x.rate_window_ms FROM unnest($1::text[]) k (key)
	CROSS JOIN LATERAL (SELECT rp.prefix, rp.rate_max, rp.rate_window_ms FROM {rate_prefixes} rp
		WHERE rp.prefix <= k.key ORDER BY rp.prefix DESC LIMIT 1) x
	WHERE starts_with(k.key, x.prefix)
) r`),
		grantsAt: q(`SELECT coalesce(array_agg(g.at ORDER BY g.at), '{}') FROM {rate_grants} g
WHERE g.scope = $1 AND g.key = '' AND g.at > $3::timestamptz - $2::bigint * interval '1 millisecond'`),
		forget: q(`DELETE FROM {rate_grants} WHERE scope = $1`),
		under:  q(`SELECT ` + ratedSQL("$1::text")),
		all:    q(`SELECT prefix FROM {rate_prefixes} ORDER BY prefix`),
		list:   q(`SELECT prefix, rate_max, rate_window_ms, set_at FROM {rate_prefixes} WHERE prefix > $1 ORDER BY prefix LIMIT $2`),
		upsert: q(`INSERT INTO {rate_prefixes} (prefix, rate_max, rate_window_ms, set_at) VALUES ($1, $2, $3, now())
ON CONFLICT (prefix) DO UPDATE SET rate_max = excluded.rate_max, rate_window_ms = excluded.rate_window_ms, set_at = excluded.set_at
RETURNING set_at`),
		remove:    q(`DELETE FROM {rate_prefixes} WHERE prefix = $1`),
		lockTable: q(`LOCK TABLE {rate_prefixes} IN ACCESS EXCLUSIVE MODE`),
		convert: q(`UPDATE {jobs} SET holds = true WHERE NOT holds AND state IN ('scheduled', 'available', 'retryable')
	AND (starts_with(resource, $1) OR EXISTS (SELECT 1 FROM unnest(resources) r WHERE starts_with(r, $1)))`),
		audit: q(`INSERT INTO {events} (kind, key, lease_id, holder, token, actor, reason, principal)
SELECT $1, $2, '', '', 0, $3, '', $4
WHERE EXISTS (SELECT FROM pg_trigger WHERE tgrelid = {leasesname}::regclass AND tgname = 'leases_audit_update')`),
	}
}

// scanScoped reads the row of scopedQueries.rates.
func scanScoped(row pgx.Row) ([]store.ScopedRate, error) {
	var text string
	if err := row.Scan(&text); err != nil {
		return nil, err
	}
	var rows [][]any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		return nil, err
	}
	var out []store.ScopedRate
	for _, x := range rows {
		if len(x) != 5 {
			return nil, errors.New("postgres: a rate row of the wrong shape")
		}
		lim, _ := x[1].(string)
		prefix, _ := x[2].(string)
		m, _ := x[3].(json.Number).Int64()
		w, _ := x[4].(json.Number).Int64()
		r := store.Rate{Max: int(m), Window: time.Duration(w) * time.Millisecond}
		if lim != "" {
			out = append(out, store.LimitRate(lim, r))
		} else {
			out = append(out, store.PrefixRateOf(prefix, r))
		}
	}
	return out, nil
}

// scopedRates reads, in q, the rates a grant of keys and limits counts in.
func (s *Store) scopedRates(ctx context.Context, q querier, keys, limits []string) ([]store.ScopedRate, error) {
	if limits == nil {
		limits = []string{}
	}
	return scanScoped(q.QueryRow(ctx, s.jq.scoped.rates, keys, limits))
}

// scopedReached says which of rs is reached now (a submit's skip policy: no lock, the grant
// decides); nil if none.
func (s *Store) scopedReached(ctx context.Context, q querier, rs []store.ScopedRate) (*store.RateWait, error) {
	var now time.Time
	if err := q.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, err
	}
	for _, r := range rs {
		var gs []time.Time
		if err := q.QueryRow(ctx, s.jq.scoped.grantsAt, r.Scope, r.Rate.Window.Milliseconds(), now).Scan(&gs); err != nil {
			return nil, err
		}
		if next, reached := store.RateNext(r.Rate, gs, now); reached {
			w := r.Wait
			w.Next = next
			return &w, nil
		}
	}
	return nil, nil
}

// checkScoped locks the counters of rs (in scope order) and reads their grants at now, on pt: the
// first rate reached, or nil.
func (s *Store) checkScoped(ctx context.Context, pt *pipeTx, rs []store.ScopedRate, now time.Time) (*store.RateWait, error) {
	var reached *store.RateWait
	err := pt.batch(ctx, func(b *pgx.Batch) {
		for _, r := range rs {
			b.Queue(s.jq.rates.lock, r.Scope, "")
		}
		for _, r := range rs {
			b.Queue(s.jq.scoped.grantsAt, r.Scope, r.Rate.Window.Milliseconds(), now)
		}
	}, false, func(br pgx.BatchResults) error {
		for range rs {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		for _, r := range rs {
			var gs []time.Time
			if err := br.QueryRow().Scan(&gs); err != nil {
				return err
			}
			if next, ok := store.RateNext(r.Rate, gs, now); ok && reached == nil {
				w := r.Wait
				w.Next = next
				reached = &w
			}
		}
		return nil
	})
	return reached, err
}

// recordScoped records a grant at now in each counter of rs, on pt (whose locks checkScoped took).
func (s *Store) recordScoped(ctx context.Context, pt *pipeTx, rs []store.ScopedRate, now time.Time) error {
	return pt.batch(ctx, func(b *pgx.Batch) {
		for _, r := range rs {
			b.Queue(s.jq.rates.recordAt, r.Scope, "", r.Rate.Window.Milliseconds(), now)
		}
	}, false, func(br pgx.BatchResults) error {
		for range rs {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
}

// lineScopedRates reads the rate of the prefix key is under, if reached now (ResourceLine).
func (s *Store) lineScopedRates(ctx context.Context, tx pgx.Tx, key string) ([]*store.RateWait, error) {
	rs, err := s.scopedRates(ctx, tx, []string{key}, nil)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	w, err := s.scopedReached(ctx, tx, rs)
	if err != nil || w == nil {
		return nil, err
	}
	return []*store.RateWait{w}, nil
}

// underRatedPrefix says whether key is under a rated prefix, as the table says now.
func (s *Store) underRatedPrefix(ctx context.Context, key string) (bool, error) {
	var under bool
	err := s.pool.QueryRow(ctx, s.jq.scoped.under, key).Scan(&under)
	return under, err
}

// loadRatePrefixes reads the rated prefixes into the cache.
func (s *Store) loadRatePrefixes(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, s.jq.scoped.all)
	if err != nil {
		return err
	}
	ps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	s.rated.Set(ps)
	return nil
}

// prefixRateTx runs fn in a transaction that holds the rated prefixes' table in ACCESS EXCLUSIVE
// mode, waiting at most treeLockTimeout for the grants in flight; then reloads the cache.
func (s *Store) prefixRateTx(ctx context.Context, op, prefix string, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+treeLockTimeout.String()+`'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.jq.scoped.lockTable); err != nil {
			return err
		}
		return fn(tx)
	})
	var pgErr *pgconn.PgError
	var inv *store.InvalidArgumentError
	switch {
	case err == nil:
		return s.loadRatePrefixes(ctx)
	case errors.As(err, &inv) || errors.Is(err, store.ErrNotFound):
		return err
	case errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01"):
		return s.fail(op, prefix, errors.New("grants in flight held the rated prefixes past the lock timeout; retry"))
	}
	return s.fail(op, prefix, err)
}

// SetPrefixRate sets the rate of a key prefix that overlaps no other rated prefix.
func (s *Store) SetPrefixRate(ctx context.Context, p *store.SetPrefixRateParams) (*store.PrefixRate, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	out := &store.PrefixRate{Prefix: p.Prefix, Rate: p.Rate}
	err := s.prefixRateTx(ctx, "set prefix rate", p.Prefix, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.jq.scoped.all)
		if err != nil {
			return err
		}
		ps, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if err := store.ValidateRatePrefixOverlap(p.Prefix, ps); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.jq.scoped.upsert, p.Prefix, p.Rate.Max, p.Rate.Window.Milliseconds()).Scan(&out.SetAt); err != nil {
			return err
		}
		if !slices.Contains(ps, p.Prefix) {
			if _, err := tx.Exec(ctx, s.jq.scoped.convert, p.Prefix); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, s.jq.scoped.audit, store.EventPrefixRateSet, p.Prefix, p.Actor, p.Principal)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeletePrefixRate removes the rate of a key prefix; its jobs keep their holds.
func (s *Store) DeletePrefixRate(ctx context.Context, p *store.DeletePrefixRateParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := s.closed.Check(); err != nil {
		return err
	}
	return s.prefixRateTx(ctx, "delete prefix rate", p.Prefix, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.jq.scoped.remove, p.Prefix)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		if _, err := tx.Exec(ctx, s.jq.scoped.forget, store.PrefixRateScope(p.Prefix)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.jq.scoped.audit, store.EventPrefixRateDelete, p.Prefix, p.Actor, p.Principal)
		return err
	})
}

// PrefixRates lists the rated prefixes in prefix order.
func (s *Store) PrefixRates(ctx context.Context, p *store.PrefixRatesParams) ([]*store.PrefixRate, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.jq.scoped.list, p.After, p.Limit)
	if err != nil {
		return nil, s.fail("rate prefixes", p.After, err)
	}
	var out []*store.PrefixRate
	for rows.Next() {
		r := &store.PrefixRate{}
		var windowMS int64
		if err := rows.Scan(&r.Prefix, &r.Rate.Max, &windowMS, &r.SetAt); err != nil {
			rows.Close()
			return nil, s.fail("rate prefixes", p.After, err)
		}
		r.Rate.Window = time.Duration(windowMS) * time.Millisecond
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail("rate prefixes", p.After, err)
	}
	return out, nil
}

var _ store.RatePrefixer = (*Store)(nil)
