package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/store/sqlite"
)

// The listings by key read one range of the primary key, bounded on both sides when the prefix
// has an end: never the table from the cursor on (which made List at 1M keys 400x slower).
func TestListPlansReadOneKeyRange(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "baton.db"))
	for _, c := range []struct {
		name  string
		sql   func(int) string
		table string
		args  []any
	}{
		{"List", sqlite.ListSQL, "leases", []any{"a", "b", "", 0, 10}},
		{"ListResources", sqlite.ResourceListSQL, "r", []any{"a", "b", 10, 0}},
	} {
		for shape, want := range []string{"(key>?)", "(key>?)", "(key>? AND key<?)", "(key>? AND key<?)"} {
			full := queryPlan(t, s, `EXPLAIN QUERY PLAN `+c.sql(shape), c.args...)
			t.Logf("%s %d: %s", c.name, shape, full)
			if !strings.Contains(full, "SEARCH "+c.table+" USING PRIMARY KEY "+want) ||
				strings.Contains(full, "SCAN "+c.table) || strings.Contains(full, "TEMP B-TREE") {
				t.Errorf("%s shape %d: plan %q, want a search of the primary key %s, no scan, no sort", c.name, shape, full, want)
			}
		}
	}
}

// The audit log read by key searches events_by_key (key, id) from the cursor, so that a rare key's
// page costs its own rows, not the log's: with one statement for both forms (an empty ?2 or key =
// ?2) every read scanned the log, 0.37 s a page at 3 million events. Unfiltered reads walk the
// primary key. Neither sorts.
func TestEventsPlansReadByKeyThroughTheIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "baton.db"))
	for shape, want := range []string{
		"SEARCH events USING INTEGER PRIMARY KEY (rowid>?)",
		"SEARCH events USING INTEGER PRIMARY KEY (rowid<?)",
		"SEARCH events USING INDEX events_by_key (key=? AND id>?)",
		"SEARCH events USING INDEX events_by_key (key=? AND id<?)",
	} {
		full := queryPlan(t, s, `EXPLAIN QUERY PLAN `+sqlite.EventsSQL(shape), 0, "k", 10)
		t.Logf("events %d: %s", shape, full)
		if !strings.Contains(full, want) || strings.Contains(full, "TEMP B-TREE") {
			t.Errorf("events shape %d: plan %q, want %q and no sort", shape, full, want)
		}
	}
}

// queryPlan is the plan of an EXPLAIN QUERY PLAN statement, its details joined by "; ".
func queryPlan(t *testing.T, s *sqlite.Store, sql string, args ...any) string {
	t.Helper()
	rows, err := s.DB().Query(sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// The job counts (the dashboard's jobs page) read one covering index, not every unfinished job's
// row: 264 ms -> 33 ms at 100,000 unfinished jobs.
func TestJobCountsReadOnlyAnIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "baton.db"))
	full := queryPlan(t, s, `EXPLAIN QUERY PLAN `+sqlite.JobCountsSQL)
	if !strings.Contains(full, "COVERING INDEX jobs_unfinished_by_kind") {
		t.Errorf("job counts plan %q, want a read of the covering index jobs_unfinished_by_kind only", full)
	}
}
