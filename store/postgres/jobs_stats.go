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
// through jobs_discarded (partial indexes on those states), never the other jobs.
const kindStatsSQL = `SELECT kind,
	coalesce((extract(epoch FROM now() - min(attempted_at) FILTER (WHERE state = 'running')) * 1000)::bigint, 0),
	count(*) FILTER (WHERE state = 'discarded')
FROM (SELECT kind, state, attempted_at FROM {jobs} WHERE state = 'running'
	UNION ALL SELECT kind, state, NULL FROM {jobs} WHERE state = 'discarded') j
GROUP BY kind ORDER BY kind`

// KindStats returns each kind's oldest running attempt's age (on the database's clock) and its
// dead letters.
func (s *Store) KindStats(ctx context.Context) ([]*store.KindStats, error) {
	rows, err := s.pool.Query(ctx, strings.ReplaceAll(kindStatsSQL, "{jobs}", pgx.Identifier{s.schema, "jobs"}.Sanitize()))
	if err != nil {
		return nil, s.jobErr("kind stats", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.KindStats, error) {
		var k store.KindStats
		var ageMS int64
		err := r.Scan(&k.Kind, &ageMS, &k.DeadLetters)
		k.OldestRunningAge = time.Duration(max(ageMS, 0)) * time.Millisecond
		return &k, err
	})
	if err != nil {
		return nil, s.jobErr("kind stats", err)
	}
	return out, nil
}
