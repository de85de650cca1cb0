package sqlite

import (
	"context"
	"time"

	"github.com/batonhq/baton/store"
)

var _ store.KindStatsStore = (*Store)(nil)

// KindStats returns each kind's oldest running attempt's age (on this process's clock, the
// store's) and its dead letters, reading only jobs in those states (index jobs_by_state), and the
// resources on which its rate is reached (rate_grants_by_key, kinds with a rate only).
func (s *Store) KindStats(ctx context.Context) ([]*store.KindStats, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	now := s.now()
	rows, err := s.db.QueryContext(ctx, `SELECT kind, coalesce(min(CASE WHEN state = 'running' THEN attempted_at END), 0),
		sum(state = 'discarded'), sum(state = 'rate_reached')
		FROM (SELECT kind, state, attempted_at FROM jobs WHERE state = 'running'
			UNION ALL SELECT kind, state, NULL FROM jobs WHERE state = 'discarded'
			UNION ALL SELECT k.name, 'rate_reached', NULL FROM job_kinds k
				JOIN rate_grants g ON g.scope = 'kind:' || k.name AND g.at > ?1 - k.rate_window_ns
				WHERE k.rate_max > 0 GROUP BY k.name, g.key HAVING count(*) >= k.rate_max)
		GROUP BY kind ORDER BY kind`, now.UnixNano())
	if err != nil {
		return nil, s.wrap("kind stats", err)
	}
	defer rows.Close()
	var out []*store.KindStats
	for rows.Next() {
		var k store.KindStats
		var started int64
		if err := rows.Scan(&k.Kind, &started, &k.DeadLetters, &k.RateReached); err != nil {
			return nil, s.wrap("kind stats", err)
		}
		if started > 0 {
			k.OldestRunningAge = max(now.Sub(time.Unix(0, started)), 0)
		}
		out = append(out, &k)
	}
	return out, s.wrap("kind stats", rows.Err())
}
