package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// The claim reads a picked job's key in leases (its gate, or a lease that holds it back) through
// its index, also in a generic plan made while the table is empty: written as EXISTS, the probe
// became a hashed scan of the whole table, which a store with many lock keys would pay on every
// claim.
func TestClaimProbesLeasesByIndex(t *testing.T) {
	s := jobStore(t, store.Kind{Name: "k"})
	for range 20 {
		submit(t, s, "k", "plan/"+randHex())
	}
	wantNoScan(t, postgres.ClaimSQL(s.Schema()), []string{"k"}, 10, "w", int64(60000), "", false)
}

// wantNoScan fails t if the generic plan of query scans leases.
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
		for _, table := range []string{"leases"} {
			if strings.Contains(text, "Seq Scan on "+table) {
				t.Errorf("the generic plan scans %s:\n%s", table, text)
			}
		}
		return nil
	})
}
