package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// The listings read one index range under the store's generic plans: leases and
// resources by key between the prefix and its end, jobs through the (resource, id) index when
// filtered by resource.
func TestListPlansReadOneIndexRange(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema)
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// Enough rows (and statistics) that a sequential scan is not the cheapest plan.
	exec(t, `INSERT INTO `+id("leases")+` (key, lease_id, holder, token, acquired_at, expires_at, available_at, cooldown_ms, lock_delay_ms)
		SELECT 'k/' || lpad(i::text, 6, '0'), 'l', 'h', i, now(), now() + interval '1 hour', now() + interval '1 hour', 0, 0
		FROM generate_series(1, 20000) AS i`)
	exec(t, `INSERT INTO `+id("resources")+` (key) SELECT 'r/' || lpad(i::text, 6, '0') FROM generate_series(1, 20000) AS i`)
	exec(t, `INSERT INTO `+id("jobs")+` (seq, kind, resource, state, max_attempts, scheduled_at)
		SELECT i, 'k' || (i % 5), 'r/' || lpad((i % 20000 + 1)::text, 6, '0'),
			(ARRAY['succeeded', 'available', 'cancelled', 'discarded', 'skipped'])[i % 5 + 1], 3, now()
		FROM generate_series(1, 50000) AS i`)
	exec(t, `ANALYZE `+id("leases")+`, `+id("resources")+`, `+id("jobs"))

	list, bounded := postgres.ListSQL(schema)
	for _, c := range []struct {
		name, sql, args string
		want            []string
	}{
		{"List", list, "('', 'k/00', '', 100)", []string{"leases_pkey", "key > $1", "key >= $2"}},
		{"List bounded", bounded, "('', 'k/00', '', 100, 'k/01')", []string{"leases_pkey", "key >= $2", "key < $5"}},
		{"ListResources bounded", postgres.ResourceListBoundedSQL(schema), "('r/00', '', 100, 'r/01')",
			[]string{"resources_pkey", "key >= $1", "key < $4"}},
		// By state alone the planner may read jobs by id and filter: a generic plan estimates
		// 1/n_distinct of the rows per state, whatever the state. No requirement beyond no scan.
		{"ListJobs state", postgres.ListJobsSQL(schema, 0, store.JobAvailable), "(0, 100)", nil},
		{"ListJobs dead letters", postgres.ListJobsSQL(schema, 0, store.JobDiscarded), "(0, 100)", []string{"jobs_discarded"}},
		// A resource's unfinished jobs are sorted by ID (as many as are queued on it): the only
		// sort allowed.
		{"ListJobs resource", postgres.ListJobsSQL(schema, 2, ""), "(0, 'r/000001', 100)",
			[]string{"jobs_unfinished_by_resource", "jobs_finished_by_resource"}},
		{"ListJobs state and resource", postgres.ListJobsSQL(schema, 2, store.JobAvailable), "(0, 'r/000001', 100)",
			[]string{"jobs_unfinished_by_resource"}},
		{"ListJobs finished state and resource", postgres.ListJobsSQL(schema, 2, store.JobSucceeded), "(0, 'r/000001', 100)",
			[]string{"jobs_finished_by_resource"}},
	} {
		lines, plan := genericPlan(t, c.name, c.sql, c.args)
		t.Logf("%s:\n%s", c.name, plan)
		// The outer scan is the first plan line (the subqueries of ListResources follow).
		sorts := strings.Count(plan, "Sort  (") // a Sort node, not a Merge Append's key
		if strings.Contains(plan, "jobs_unfinished_by_resource") {
			sorts-- // the resource's queue, sorted by ID
		}
		if strings.Contains(lines[0], "Seq Scan") || strings.Contains(plan, "Seq Scan on jobs") || sorts > 0 {
			t.Errorf("%s: the plan scans or sorts:\n%s", c.name, plan)
		}
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, w, plan)
			}
		}
	}
}

// The reaper and the kind statistics read the running jobs through an index on that state
// (migration 0008 dropped the lease-ordered one, so that heartbeats can be HOT updates), never
// the whole table, however many jobs have finished.
func TestRunningJobsReadThroughAnIndex(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema)
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	exec(t, `INSERT INTO `+id("jobs")+` (seq, kind, resource, state, max_attempts, scheduled_at, lease_expires_at, gated)
		SELECT i, 'k' || (i % 5), 'r/' || lpad(i::text, 6, '0'),
			CASE WHEN i % 100 = 0 THEN 'running' ELSE 'succeeded' END, 3, now(),
			CASE WHEN i % 100 = 0 THEN now() + (i % 7 - 3) * interval '1 minute' END, false
		FROM generate_series(1, 50000) AS i`)
	exec(t, `ANALYZE `+id("jobs"))
	reap, stats := postgres.RunningJobsSQL(schema)
	for _, c := range []struct{ name, sql, args string }{
		{"reap candidates", reap, "(100)"},
		{"kind stats", stats, ""},
	} {
		_, plan := genericPlan(t, c.name, c.sql, c.args)
		t.Logf("%s:\n%s", c.name, plan)
		if strings.Contains(plan, "Seq Scan on jobs") || !strings.Contains(plan, "jobs_one_running_per_resource") {
			t.Errorf("%s: the plan does not read the running jobs through jobs_one_running_per_resource:\n%s", c.name, plan)
		}
	}
}

// The audit log read by key reads events_by_key (key, id) from the cursor under the generic plan,
// so that a rare key's page costs its own rows: with one query for both forms (an empty $2 or key =
// $2) the generic plan walked the log by id and filtered, 0.8 s a page at 3 million events.
func TestEventsPlansReadByKeyThroughTheIndex(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema)
	id := pgx.Identifier{schema, "events"}.Sanitize()
	// The events of many keys, as a log of resources has: the generic plan estimates a key's
	// share of the log as 1/n_distinct.
	exec(t, `INSERT INTO `+id+` (at, kind, key, lease_id, holder, token, actor)
		SELECT now(), 'acquire', 'k/' || (i % 5000), 'l', 'h', i, 'a' FROM generate_series(1, 50000) AS i`)
	exec(t, `ANALYZE `+id)
	for shape, c := range []struct{ args, want string }{
		{"(0, 100)", "events_pkey"},
		{"(9223372036854775807, 100)", "events_pkey"},
		{"(0, 'k/rare', 100)", "events_by_key"},
		{"(9223372036854775807, 'k/rare', 100)", "events_by_key"},
	} {
		name := fmt.Sprintf("events shape %d", shape)
		lines, plan := genericPlan(t, name, postgres.EventsSQL(schema, shape), c.args)
		t.Logf("%s:\n%s", name, plan)
		if !strings.Contains(lines[0], "Limit") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort  (") ||
			!strings.Contains(plan, c.want) || shape >= 2 && !strings.Contains(plan, "Index Cond: ((key = $2)") {
			t.Errorf("%s: the plan does not read %s in order (with the key as an index condition when filtered):\n%s", name, c.want, plan)
		}
	}
}

// genericPlan EXPLAINs sql's generic plan (the one a connection's cached statement settles on)
// with the arguments args (a parenthesized list, or "" for none), and returns its lines and the
// whole plan.
func genericPlan(t *testing.T, name, sql, args string) (lines []string, plan string) {
	t.Helper()
	withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `PREPARE p AS `+sql); err != nil {
			return fmt.Errorf("%s: prepare: %w", name, err)
		}
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE p `+args)
		if err != nil {
			return fmt.Errorf("%s: explain: %w", name, err)
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return lines, strings.Join(lines, "\n")
}
