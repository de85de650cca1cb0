package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/batonhq/baton/store"
)

// Kind rates (store/rate.go): the grants are counted in rate_grants, read and written inside the
// claim's write transaction (SQLite has one writer at a time, so the count and the grant are one
// step). Kinds without a rate never touch the table.

// rateGrants reads the grants of (scope, key) still in a window of w ending now, oldest first.
func (x *jobTx) rateGrants(scope, key string, w time.Duration) ([]time.Time, error) {
	rows, err := x.q.QueryContext(x.ctx, `SELECT at FROM rate_grants WHERE scope = ?1 AND key = ?2 AND at > ?3 ORDER BY at`,
		scope, key, x.now.Add(-w).UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at int64
		if err := rows.Scan(&at); err != nil {
			return nil, err
		}
		out = append(out, time.Unix(0, at))
	}
	return out, rows.Err()
}

// rateReached says whether j's kind k has a rate reached on j's resource, and when it frees.
func (x *jobTx) rateReached(k *store.Kind, resource string) (time.Time, bool, error) {
	if k.Rate == nil {
		return time.Time{}, false, nil
	}
	gs, err := x.rateGrants(store.KindRateScope(k.Name), resource, k.Rate.Window)
	if err != nil {
		return time.Time{}, false, err
	}
	next, reached := store.RateNext(*k.Rate, gs, x.now)
	return next, reached, nil
}

// rateWait postpones j, a head whose kind's rate is reached, to next: it stays its resource's
// head, scheduled (or backing off) until the window frees.
func (x *jobTx) rateWait(j *store.Job, next time.Time) error {
	j.ScheduledAt = next
	if j.State == store.JobAvailable {
		j.State = store.JobScheduled
	}
	return x.saveJob(j)
}

// rateGrant counts the start of an attempt of kind k on resource, and forgets its grants that
// left the window.
func (x *jobTx) rateGrant(k *store.Kind, resource string) error {
	if k.Rate == nil {
		return nil
	}
	scope := store.KindRateScope(k.Name)
	if _, err := x.q.ExecContext(x.ctx, `DELETE FROM rate_grants WHERE scope = ?1 AND key = ?2 AND at <= ?3`,
		scope, resource, x.now.Add(-k.Rate.Window).UnixNano()); err != nil {
		return err
	}
	_, err := x.q.ExecContext(x.ctx, `INSERT INTO rate_grants (scope, key, at) VALUES (?1, ?2, ?3)`,
		scope, resource, x.now.UnixNano())
	return err
}

// lineRates reads the kinds' rates reached on key at now (ResourceLine).
func lineRates(ctx context.Context, q querier, key string, now time.Time) ([]*store.RateWait, error) {
	rows, err := q.QueryContext(ctx, `SELECT k.name, k.rate_max, k.rate_window_ns, g.at
		FROM job_kinds k JOIN rate_grants g ON g.scope = 'kind:' || k.name AND g.key = ?1
		WHERE k.rate_max > 0 AND g.at > ?2 - k.rate_window_ns ORDER BY k.name, g.at`, key, now.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.RateWait
	var kinds []string
	grants := map[string][]time.Time{}
	rates := map[string]store.Rate{}
	for rows.Next() {
		var name string
		var m int
		var w, at int64
		if err := rows.Scan(&name, &m, &w, &at); err != nil {
			return nil, err
		}
		if _, ok := rates[name]; !ok {
			kinds = append(kinds, name)
			rates[name] = store.Rate{Max: m, Window: time.Duration(w)}
		}
		grants[name] = append(grants[name], time.Unix(0, at))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, name := range kinds {
		if next, ok := store.RateNext(rates[name], grants[name], now); ok {
			out = append(out, &store.RateWait{Kind: name, Rate: rates[name], Next: next})
		}
	}
	return out, nil
}

// Rates of limits and of key prefixes (store.Limit.Rate, store.RatePrefixer): every grant that
// takes a unit of a rated limit, or holds a key under a rated prefix, counts one grant in the
// scope of that limit or prefix (key ""), once per request. The rates a grant meets are read,
// checked and recorded in the grant's write transaction: SQLite runs one writer at a time, so no
// two grants can both see room for one more.

// grantRates reads the rates a grant of keys and limits counts in: each limit's, then the rated
// prefix of each key (each scope once), at q's snapshot.
func grantRates(ctx context.Context, q querier, keys, limits []string) ([]store.ScopedRate, error) {
	var out []store.ScopedRate
	seen := map[string]bool{}
	for _, name := range limits {
		var m int
		var w int64
		err := q.QueryRowContext(ctx, `SELECT rate_max, rate_window_ns FROM limits WHERE name = ?1`, name).Scan(&m, &w)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m > 0 {
			out = append(out, store.LimitRate(name, store.Rate{Max: m, Window: time.Duration(w)}))
		}
	}
	for _, k := range keys {
		var prefix sql.NullString
		var m sql.NullInt64
		var w sql.NullInt64
		err := q.QueryRowContext(ctx, sqlRatePrefixOf, k).Scan(&prefix, &m, &w)
		if errors.Is(err, sql.ErrNoRows) || err == nil && !prefix.Valid {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(k, prefix.String) || seen[prefix.String] {
			continue
		}
		seen[prefix.String] = true
		out = append(out, store.PrefixRateOf(prefix.String, store.Rate{Max: int(m.Int64), Window: time.Duration(w.Int64)}))
	}
	return out, nil
}

// sqlRatePrefixOf reads the only rated prefix that may be a prefix of key ?1 (the greatest at or
// below it; the caller checks it is one), with its rate.
const sqlRatePrefixOf = `SELECT prefix, rate_max, rate_window_ns FROM rate_prefixes WHERE prefix <= ?1 ORDER BY prefix DESC LIMIT 1`

// scopeGrants reads the grants of (scope, key) after from, oldest first.
func scopeGrants(ctx context.Context, q querier, scope, key string, from int64) ([]time.Time, error) {
	rows, err := q.QueryContext(ctx, `SELECT at FROM rate_grants WHERE scope = ?1 AND key = ?2 AND at > ?3 ORDER BY at`, scope, key, from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at int64
		if err := rows.Scan(&at); err != nil {
			return nil, err
		}
		out = append(out, time.Unix(0, at))
	}
	return out, rows.Err()
}

// ratesReached returns the first of rs reached at now (Next set), or nil.
func ratesReached(ctx context.Context, q querier, rs []store.ScopedRate, now time.Time) (*store.RateWait, error) {
	for _, r := range rs {
		gs, err := scopeGrants(ctx, q, r.Scope, "", now.Add(-r.Rate.Window).UnixNano())
		if err != nil {
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

// recordRates counts a grant at now in each of rs, and forgets their grants that left the window.
func recordRates(ctx context.Context, q querier, rs []store.ScopedRate, now time.Time) error {
	for _, r := range rs {
		if _, err := q.ExecContext(ctx, `DELETE FROM rate_grants WHERE scope = ?1 AND key = '' AND at <= ?2`,
			r.Scope, now.Add(-r.Rate.Window).UnixNano()); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO rate_grants (scope, key, at) VALUES (?1, '', ?2)`, r.Scope, now.UnixNano()); err != nil {
			return err
		}
	}
	return nil
}

// lineScopedRates reads the rates of limits and prefixes reached now that a grant of key would
// count in: its rated prefix's (ResourceLine; a lease's limits are its own, not the key's).
func lineScopedRates(ctx context.Context, q querier, key string, now time.Time) ([]*store.RateWait, error) {
	rs, err := grantRates(ctx, q, []string{key}, nil)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	w, err := ratesReached(ctx, q, rs, now)
	if err != nil || w == nil {
		return nil, err
	}
	return []*store.RateWait{w}, nil
}

// loadRatePrefixes reads the rated prefixes into the cache.
func (s *Store) loadRatePrefixes(ctx context.Context) error {
	ps, err := s.prefixes(ctx, "rate prefixes", `SELECT prefix FROM rate_prefixes ORDER BY prefix`)
	if err != nil {
		return err
	}
	s.rated.Set(ps)
	return nil
}

// SetPrefixRate sets the rate of a key prefix that overlaps no other rated prefix.
func (s *Store) SetPrefixRate(ctx context.Context, p *store.SetPrefixRateParams) (*store.PrefixRate, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.PrefixRate
	err := s.holdTx(ctx, "set prefix rate", func(tx *sql.Tx, now int64) error {
		all, err := readPrefixRates(ctx, tx, "", -1)
		if err != nil {
			return err
		}
		ps := make([]string, len(all))
		for i, r := range all {
			ps[i] = r.Prefix
		}
		if err := store.ValidateRatePrefixOverlap(p.Prefix, ps); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rate_prefixes (prefix, rate_max, rate_window_ns, set_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (prefix) DO UPDATE SET rate_max = excluded.rate_max, rate_window_ns = excluded.rate_window_ns, set_at = excluded.set_at`,
			p.Prefix, p.Rate.Max, int64(p.Rate.Window), now); err != nil {
			return err
		}
		out = &store.PrefixRate{Prefix: p.Prefix, Rate: p.Rate, SetAt: time.Unix(0, now)}
		return auditTree(ctx, tx, store.EventPrefixRateSet, p.Prefix, p.Actor, p.Principal, now)
	})
	if err != nil {
		return nil, err
	}
	return out, s.loadRatePrefixes(ctx)
}

// DeletePrefixRate removes the rate of a key prefix.
func (s *Store) DeletePrefixRate(ctx context.Context, p *store.DeletePrefixRateParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	err := s.holdTx(ctx, "delete prefix rate", func(tx *sql.Tx, now int64) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM rate_prefixes WHERE prefix = ?1`, p.Prefix)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rate_grants WHERE scope = ?1`, store.PrefixRateScope(p.Prefix)); err != nil {
			return err
		}
		return auditTree(ctx, tx, store.EventPrefixRateDelete, p.Prefix, p.Actor, p.Principal, now)
	})
	if err != nil {
		return err
	}
	return s.loadRatePrefixes(ctx)
}

// PrefixRates lists the rated prefixes in prefix order.
func (s *Store) PrefixRates(ctx context.Context, p *store.PrefixRatesParams) ([]*store.PrefixRate, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	out, err := readPrefixRates(ctx, s.db, p.After, p.Limit)
	return out, s.wrap("rate prefixes", err)
}

func readPrefixRates(ctx context.Context, q querier, after string, limit int) ([]*store.PrefixRate, error) {
	rows, err := q.QueryContext(ctx, `SELECT prefix, rate_max, rate_window_ns, set_at FROM rate_prefixes WHERE prefix > ?1 ORDER BY prefix LIMIT ?2`, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.PrefixRate
	for rows.Next() {
		r := &store.PrefixRate{}
		var w, at int64
		if err := rows.Scan(&r.Prefix, &r.Rate.Max, &w, &at); err != nil {
			return nil, err
		}
		r.Rate.Window, r.SetAt = time.Duration(w), time.Unix(0, at)
		out = append(out, r)
	}
	return out, rows.Err()
}

var _ store.RatePrefixer = (*Store)(nil)
