package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batontest"
)

// docMetric is one row of the metrics table of docs/http-api.md.
type docMetric struct {
	typ    string
	labels []string
}

// readMetricsTable reads the one metrics table of docs/http-api.md (under "## Metrics"): a row
// per family, "| `name` | type | `label`, `label` | meaning |".
func readMetricsTable(t *testing.T, text string) map[string]docMetric {
	t.Helper()
	_, section, ok := strings.Cut(text, "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/http-api.md has no \"## Metrics\" section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	rows := map[string]docMetric{}
	tick := regexp.MustCompile("`([^`]*)`")
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `baton_") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 6 {
			t.Fatalf("metrics table row with %d cells, want name, type, labels and meaning: %s", len(cells)-2, line)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := rows[name]; dup {
			t.Errorf("the metrics table lists %s twice", name)
		}
		m := docMetric{typ: strings.TrimSpace(cells[2])}
		for _, l := range tick.FindAllStringSubmatch(cells[3], -1) {
			m.labels = append(m.labels, l[1])
		}
		slices.Sort(m.labels)
		rows[name] = m
	}
	// Every other table of the document is not a metrics table: one table only.
	if n := strings.Count(text, "| Metric | Type | Labels | Meaning |"); n != 1 {
		t.Errorf("docs/http-api.md has %d metrics tables, want one", n)
	}
	return rows
}

// checkMetricsTable compares the families a live /metrics serves with the table: every served
// baton_ family is listed with its type and label names, and every listed family is served. It
// returns what disagrees.
func checkMetricsTable(served map[string]*batontest.Family, table map[string]docMetric) []string {
	var problems []string
	for name, f := range served {
		if !strings.HasPrefix(name, "baton_") {
			continue
		}
		row, ok := table[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("/metrics serves %s (%s, labels %v), which the metrics table of docs/http-api.md does not list", name, f.Type, f.Labels))
			continue
		}
		if row.typ != f.Type {
			problems = append(problems, fmt.Sprintf("%s is a %s, the table says %s", name, f.Type, row.typ))
		}
		if !slices.Equal(row.labels, f.Labels) && len(row.labels)+len(f.Labels) > 0 {
			problems = append(problems, fmt.Sprintf("%s has labels %v, the table says %v", name, f.Labels, row.labels))
		}
	}
	for name := range table {
		if served[name] == nil {
			problems = append(problems, fmt.Sprintf("the metrics table lists %s, which /metrics does not serve after the exercise", name))
		}
	}
	slices.Sort(problems)
	return problems
}

// Every baton_ metric family a live server serves is in the one metrics table of
// docs/http-api.md, with its type and labels, and the table lists nothing else: on SQLite and
// on PostgreSQL (the stores with limits and job statistics, so every family), after lock cycles,
// a limit's use and two jobs (one completed, one dead letter), so that the labelled families
// have series.
func TestMetricsTableListsEveryServedFamily(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	table := readMetricsTable(t, string(raw))
	if len(table) < 20 {
		t.Fatalf("the metrics table has %d rows", len(table))
	}
	for _, st := range []struct{ name, url string }{
		{"sqlite", "sqlite://" + filepath.Join(t.TempDir(), "b.db")},
		{"postgres", postgresURL(t)},
	} {
		t.Run(st.name, func(t *testing.T) {
			s := startServer(t, st.url)
			batontest.Exercise(t, s.url)
			body := (&batontest.Server{URL: s.url}).Get(t, "/metrics")
			for _, p := range checkMetricsTable(batontest.Families(body), table) {
				t.Error(p)
			}
		})
	}
}

// The table reader and the comparison catch what they should: a row dropped, a family renamed,
// a wrong type or label.
func TestMetricsTableCheck(t *testing.T) {
	doc := "intro\n## Metrics\n\n| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n" +
		"| `baton_a_total` | counter | `kind`, `state` | a |\n| `baton_b` | gauge | | b |\n\n## Next\n| `baton_c` | gauge | | not in the section |\n"
	table := readMetricsTable(t, doc)
	if len(table) != 2 || !slices.Equal(table["baton_a_total"].labels, []string{"kind", "state"}) || table["baton_b"].typ != "gauge" {
		t.Fatalf("read %+v", table)
	}
	served := batontest.Families("# TYPE baton_a_total counter\nbaton_a_total{kind=\"x\",state=\"y\\\"}\"} 1\n# TYPE baton_b gauge\nbaton_b 2\n" +
		"# TYPE baton_h histogram\nbaton_h_bucket{le=\"1\"} 1\nbaton_h_sum 1\nbaton_h_count 1\n# TYPE go_x gauge\ngo_x 1\n")
	if h := served["baton_h"]; h == nil || h.Type != "histogram" || len(h.Labels) != 0 {
		t.Fatalf("histogram family: %+v", h)
	}
	if a := served["baton_a_total"]; !slices.Equal(a.Labels, []string{"kind", "state"}) {
		t.Fatalf("labels: %+v", a)
	}
	if p := checkMetricsTable(served, table); len(p) != 1 || !strings.Contains(p[0], "serves baton_h ") {
		t.Fatalf("an unlisted family: %q", p)
	}
	delete(table, "baton_b")
	table["baton_h"] = docMetric{typ: "histogram"}
	table["baton_a_total"] = docMetric{typ: "gauge", labels: []string{"kind"}}
	table["baton_renamed"] = docMetric{typ: "gauge"}
	want := []string{
		"/metrics serves baton_b (gauge, labels []), which the metrics table of docs/http-api.md does not list",
		"baton_a_total has labels [kind state], the table says [kind]",
		"baton_a_total is a counter, the table says gauge",
		"the metrics table lists baton_renamed, which /metrics does not serve after the exercise",
	}
	if p := checkMetricsTable(served, table); !slices.Equal(p, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(p, "\n"), strings.Join(want, "\n"))
	}
}
