package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/store/sqlite"
)

// A grant in a tree reads its ancestors by key and its descendants as one range of an index,
// never a table: leases through leases_tree_live (live and lock-delayed rows of tree keys only),
// holds through holds_live, tickets through their primary key, jobs through the partial index of
// unfinished jobs; ancestors by key through any index on key. Nothing sorts but the few rows a refusal reads.
func TestTreePlansReadRanges(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "baton.db"))
	anc, lo, hi := `["c/a","c"]`, "c/a/b/", "c/a/b0"
	for _, c := range []struct {
		name, sql string
		args      []any
		want      []string
	}{
		{"acquire", sqlite.TreeAcquireSQL, []any{"c/a/b", "id", "h", 1, 1, 0, 0, nil, "", false, "c/", anc, lo, hi},
			[]string{"SEARCH r USING INDEX leases_tree_live (key>? AND key<?)", "SEARCH r USING PRIMARY KEY (key=?)",
				"SEARCH t USING PRIMARY KEY (key>? AND key<?)", "SEARCH t USING INDEX tickets_line (key=?",
				"SEARCH h USING INDEX jobs_unfinished_by_resource (resource>? AND resource<?)",
				"SEARCH h USING INDEX jobs_unfinished_by_resource (resource=?)"}},
		{"holder", sqlite.TreeHolderSQL, []any{anc, lo, hi, 1, false},
			[]string{"SEARCH r USING INDEX leases_tree_live (key>? AND key<?)", "SEARCH r USING PRIMARY KEY (key=?)",
				"SEARCH h USING INDEX holds_live (key>? AND key<?)", "SEARCH h USING INDEX holds_by_key (key=?"}},
		{"tickets", sqlite.TreeTicketsSQL, []any{anc, lo, hi, 1, false, "id", false, 0, 0, false},
			[]string{"SEARCH t USING PRIMARY KEY (key>? AND key<?)", "SEARCH t USING INDEX tickets_line (key=?"}},
		{"jobs", sqlite.TreeJobsSQL, []any{anc, lo, hi, 1, false, 1, 0},
			[]string{"USING INDEX jobs_unfinished_by_resource (resource>? AND resource<?)", "USING INDEX jobs_unfinished_by_resource (resource=?)"}},
		{"wake", sqlite.RelatedWaitingSQL, []any{anc, lo, hi, 1, 64},
			[]string{"USING PRIMARY KEY (key>? AND key<?)", "USING INDEX jobs_unfinished_by_resource (resource>? AND resource<?)"}},
	} {
		full := queryPlan(t, s, `EXPLAIN QUERY PLAN `+c.sql, c.args...)
		t.Logf("%s: %s", c.name, full)
		for _, w := range c.want {
			if !strings.Contains(full, w) {
				t.Errorf("%s: plan %q; want %q", c.name, full, w)
			}
		}
		for _, table := range []string{"leases", "holds", "tickets", "jobs", " r", " h", " t"} {
			if strings.Contains(full, "SCAN"+table+" ") || strings.HasSuffix(full, "SCAN"+table) || strings.Contains(full, "SCAN"+table+";") {
				t.Errorf("%s: plan %q scans %s", c.name, full, table)
			}
		}
	}
}
