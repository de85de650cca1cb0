package sqlite

import (
	"context"
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
