package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

var _ store.KindStatsStore = (*Store)(nil)

// kindStatsSQL reads the running jobs through jobs_one_running_per_resource and the dead letters
// through jobs_discarded (partial indexes on those states), never the other jobs; and, for kinds
// with a rate, their grants still in the window (rate_grants_by_key), one row per resource on
// which the rate is reached.
const kindStatsSQL = `SELECT kind,
	coalesce((extract(epoch FROM now() - min(attempted_at) FILTER (WHERE state = 'running')) * 1000)::bigint, 0),
	count(*) FILTER (WHERE state = 'discarded'),
	count(*) FILTER (WHERE state = 'rate_reached')
FROM (SELECT kind, state::text, attempted_at FROM {jobs} WHERE state = 'running'
	UNION ALL SELECT kind, state::text, NULL FROM {jobs} WHERE state = 'discarded'
	UNION ALL SELECT k.name, 'rate_reached', NULL FROM {kinds} k
		JOIN {rate_grants} g ON g.scope = 'kind:' || k.name AND g.at > now() - k.rate_window_ms * interval '1 millisecond'
		WHERE k.rate_max > 0 GROUP BY k.name, k.rate_max, g.key HAVING count(*) >= k.rate_max) j
GROUP BY kind ORDER BY kind`

// kindStatsQuery is kindStatsSQL on schema's tables.
func kindStatsQuery(schema string) string {
	id := func(t string) string { return pgx.Identifier{schema, t}.Sanitize() }
	return strings.NewReplacer("{jobs}", id("jobs"), "{kinds}", id("job_kinds"), "{rate_grants}", id("rate_grants")).
		Replace(kindStatsSQL)
}

// KindStats returns each kind's oldest running attempt's age (on the database's clock), its dead
// letters and the resources on which its rate is reached.
func (s *Store) KindStats(ctx context.Context) ([]*store.KindStats, error) {
	rows, err := s.pool.Query(ctx, kindStatsQuery(s.schema))
	if err != nil {
		return nil, s.jobErr("kind stats", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.KindStats, error) {
		var k store.KindStats
		var ageMS int64
		err := r.Scan(&k.Kind, &ageMS, &k.DeadLetters, &k.RateReached)
		k.OldestRunningAge = time.Duration(max(ageMS, 0)) * time.Millisecond
		return &k, err
	})
	if err != nil {
		return nil, s.jobErr("kind stats", err)
	}
	return out, nil
}
