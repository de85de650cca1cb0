package postgres_test

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/store/postgres"
)

// A connection keeps the generic plan of a bulk submit it made on its first submit, often on
// empty tables. That plan must still read one row per job by index, not join the batch to a
// scan of resources or jobs: a hash join over a scan reads every resource once per
// batch, and hands the jobs to the insert in hash order, so their IDs enter the indexes out of
// order (page splits that leave the pages half full).
func TestSubmitPlansProbeByIndex(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema)
	lock, noKeys, keys := postgres.SubmitManySQL(schema)
	for _, c := range []struct{ name, sql, args string }{
		{"lock", lock, `('{r}')`},
		{"no keys", noKeys, `('{k}', '{r}', '{"{}"}', '{""}', '{0}', '{0}', '{NULL}', '{0}', '{1}', '{1}', '{""}')`},
		{"keys", keys, `('{k}', '{r}', '{"{}"}', '{i}', '{""}', '{0}', '{0}', '{NULL}', '{0}', '{""}')`},
	} {
		_, plan := genericPlan(t, c.name, c.sql, c.args)
		for _, bad := range []string{"Seq Scan on resources", "Seq Scan on jobs", "Hash Join", "Hash Left Join",
			"Hash Right Join", "Merge Join"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: the plan has a %s:\n%s", c.name, bad, plan)
			}
		}
	}
}
