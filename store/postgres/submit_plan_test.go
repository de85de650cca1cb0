package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store/postgres"
)

// A connection keeps the generic plan of a bulk submit it made on its first submit, often on
// empty tables. That plan must still read one row per job by index, not join the batch to a
// scan of resources or jobs (issue 14): a hash join over a scan reads every resource once per
// batch, and hands the jobs to the insert in hash order, so their IDs enter the indexes out of
// order (page splits that leave the pages half full).
func TestSubmitPlansProbeByIndex(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema)
	lock, noKeys, keys := postgres.SubmitBatchSQL(schema)
	for _, c := range []struct{ name, sql, args string }{
		{"lock", lock, `('{r}')`},
		{"no keys", noKeys, `('{k}', '{r}', '{"{}"}', '{""}', '{0}', '{0}', '{NULL}', '{0}', '{1}', '{1}')`},
		{"keys", keys, `('{k}', '{r}', '{"{}"}', '{i}', '{""}', '{0}', '{0}', '{NULL}', '{0}')`},
	} {
		withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `PREPARE p AS `+c.sql); err != nil {
				return fmt.Errorf("%s: prepare: %w", c.name, err)
			}
			rows, err := conn.Query(ctx, `EXPLAIN EXECUTE p `+c.args)
			if err != nil {
				return fmt.Errorf("%s: explain: %w", c.name, err)
			}
			var lines []string
			for rows.Next() {
				var l string
				if err := rows.Scan(&l); err != nil {
					return err
				}
				lines = append(lines, l)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			plan := strings.Join(lines, "\n")
			for _, bad := range []string{"Seq Scan on resources", "Seq Scan on jobs", "Hash Join", "Hash Left Join",
				"Hash Right Join", "Merge Join"} {
				if strings.Contains(plan, bad) {
					t.Errorf("%s: the plan has a %s:\n%s", c.name, bad, plan)
				}
			}
			return nil
		})
	}
}
