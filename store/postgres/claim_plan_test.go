package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// The claim's generic plan, made while the tables are nearly empty (a new store; each connection
// keeps its plan until the next ANALYZE), reads no table whole:
//   - a picked job's key in leases (its gate, or a lease that holds it back) through its index:
//     written as EXISTS, the probe became a hashed scan of the whole table, which a store with
//     many lock keys would pay on every claim;
//   - the picked jobs, when it starts or rejects them, through an index: joined by id alone, the
//     plan scanned the whole jobs table once per picked job, and a claim of 50 jobs took
//     0.35-0.5 s once 20,000 rows were behind it (the submit-to-start tail of
//     BenchmarkJSLatency).
func TestClaimPlanReadsNoTableWhole(t *testing.T) {
	s := jobStore(t, store.Kind{Name: "k"})
	for range 20 {
		submit(t, s, "k", "plan/"+randHex())
	}
	wantNoScan(t, postgres.ClaimSQL(s.Schema()), []string{"k"}, 10, "w", int64(60000), "", false)
}

// The promotion of a resource's next job after a job's end reads no table whole in a generic plan
// made while the tables are nearly empty: its update, joined by id alone, scanned the jobs table.
// (The batched promotion shares that update; its lookup of the ended jobs by "id = ANY" still
// reads the table once in such a plan.)
func TestPromotionPlanReadsNoTableWhole(t *testing.T) {
	s := jobStore(t, store.Kind{Name: "k"})
	for range 20 {
		submit(t, s, "k", "plan/"+randHex())
	}
	wantNoScan(t, postgres.PromoteFinishedSQL(s.Schema()), int64(1))
}

// wantNoScan fails t if the generic plan of query scans leases or jobs.
func wantNoScan(t *testing.T, query string, args ...any) {
	t.Helper()
	withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			return err
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		text := strings.Join(plan, "\n")
		for _, table := range []string{"leases", "jobs"} {
			if strings.Contains(text, "Seq Scan on "+table) {
				t.Errorf("the generic plan scans %s:\n%s", table, text)
			}
		}
		return nil
	})
}
