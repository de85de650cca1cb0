// Package grafana holds Baton's Grafana dashboard (baton.json); its test keeps the dashboard's
// queries in step with what the server serves.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batontest"
)

// dashboard is the part of a Grafana dashboard JSON model the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// promqlKeywords are the words of PromQL that are neither functions nor metric names.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	"atan2": true,
}

// groupingKeywords are followed by a parenthesised list of label names.
var groupingKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// metricNames returns the metric names a PromQL expression selects, or an error for what the
// tokenizer cannot read (an unterminated string, unbalanced brackets). It skips string literals,
// label matchers ({…}), range and subquery brackets ([…]), Grafana variables ($name, ${name}),
// numbers and durations, function and aggregation names (an identifier followed by "("),
// keywords, and the label lists of by, without, on, ignoring, group_left and group_right. A
// selector written as {__name__="x"} is not read: the dashboard does not use that form.
func metricNames(expr string) ([]string, error) {
	var names []string
	depth := map[byte]int{}
	closer := map[byte]byte{')': '(', '}': '{', ']': '['}
	grouping := false // the next "(" opens a label list
	labelList := 0    // >0: inside a label list, at this paren depth
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(expr) && expr[j] == '{' {
				k := strings.IndexByte(expr[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unterminated ${ at %d", i)
				}
				i = j + k + 1
				continue
			}
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			i = j
		case c == '(' || c == '{' || c == '[':
			depth[c]++
			if c == '(' && grouping {
				labelList = depth['(']
			}
			grouping = false
			i++
		case c == ')' || c == '}' || c == ']':
			o := closer[c]
			if depth[o] == 0 {
				return nil, fmt.Errorf("unbalanced %q at %d", c, i)
			}
			if c == ')' && labelList == depth['('] {
				labelList = 0
			}
			depth[o]--
			i++
		case c >= '0' && c <= '9' || c == '.':
			j := i + 1
			for j < len(expr) && (isIdent(expr[j]) || expr[j] == '.') {
				j++ // numbers, 1e3, 0x1f, durations (5m)
			}
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			next := k
			for next < len(expr) && isIdent(expr[next]) {
				next++
			}
			inMatchers := depth['{'] > 0 || depth['['] > 0
			switch {
			case !inMatchers && labelList == 0 && groupingKeywords[strings.ToLower(expr[k:next])] && !groupingKeywords[strings.ToLower(word)]:
				// an aggregation written "sum by (…) (…)"
			case inMatchers || labelList > 0:
			case groupingKeywords[strings.ToLower(word)]:
				grouping = true
			case promqlKeywords[strings.ToLower(word)]:
			case k < len(expr) && expr[k] == '(':
				// a function or an aggregation
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	for o, d := range depth {
		if d != 0 {
			return nil, fmt.Errorf("unbalanced %q", o)
		}
	}
	return names, nil
}

// labelValuesQuery reads Grafana's label_values(metric, label) variable query.
var labelValuesQuery = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{[^}]*\})?\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

// query is one PromQL expression of the dashboard, with where it is.
type query struct {
	where, expr string
	names       []string
}

// readDashboard parses a dashboard and returns the metric names of every panel's queries and
// every query variable's, and what is wrong with its structure.
func readDashboard(raw []byte) ([]query, []string) {
	var d dashboard
	var problems []string
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, []string{"not a dashboard JSON model: " + err.Error()}
	}
	if d.UID == "" || d.Title == "" {
		problems = append(problems, "the dashboard has no uid or title")
	}
	hasDS := false
	var queries []query
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			_ = json.Unmarshal(v.Query, &q)
			hasDS = hasDS || (v.Name == "datasource" && q == "prometheus")
		case "query":
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				problems = append(problems, fmt.Sprintf("variable %s does not query ${datasource}", v.Name))
			}
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				_ = json.Unmarshal(v.Query, &q.Query)
			}
			m := labelValuesQuery.FindStringSubmatch(q.Query)
			if m == nil {
				problems = append(problems, fmt.Sprintf("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query))
				continue
			}
			queries = append(queries, query{where: "variable " + v.Name, expr: q.Query, names: []string{m[1]}})
		}
	}
	if !hasDS {
		problems = append(problems, "no datasource variable named datasource of type prometheus")
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				problems = append(problems, where+": its datasource is not ${datasource}")
			}
			if len(p.Targets) == 0 {
				problems = append(problems, where+": no queries")
			}
			for _, tg := range p.Targets {
				names, err := metricNames(tg.Expr)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s, query %s: %v: %s", where, tg.RefID, err, tg.Expr))
					continue
				}
				if len(names) == 0 {
					problems = append(problems, fmt.Sprintf("%s, query %s names no metric: %s", where, tg.RefID, tg.Expr))
				}
				queries = append(queries, query{where: where + ", query " + tg.RefID, expr: tg.Expr, names: names})
			}
		}
	}
	walk(d.Panels)
	return queries, problems
}

// unserved returns the names of the queries that served does not serve: a histogram's _bucket,
// _sum or _count is served when its family is a served histogram.
func unserved(queries []query, served map[string]*batontest.Family) []string {
	var out []string
	for _, q := range queries {
		for _, n := range q.names {
			f := served[n]
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suffix); ok && f == nil && served[base] != nil && served[base].Type == "histogram" {
					f = served[base]
				}
			}
			if f == nil || !strings.HasPrefix(n, "baton_") {
				out = append(out, fmt.Sprintf("%s queries %s, which a live /metrics does not serve: %s", q.where, n, q.expr))
			}
		}
	}
	return out
}

// Every metric that deploy/grafana/baton.json queries, in any panel or variable, is served by a
// live `baton serve` (SQLite) after lock cycles, a limit's use and a job run: the dashboard
// cannot rot when a metric is renamed. Every panel uses the ${datasource} variable.
func TestDashboardQueriesServedMetrics(t *testing.T) {
	raw, err := os.ReadFile("baton.json")
	if err != nil {
		t.Fatal(err)
	}
	queries, problems := readDashboard(raw)
	for _, p := range problems {
		t.Error(p)
	}
	if len(queries) < 20 {
		t.Fatalf("the dashboard has %d queries", len(queries))
	}
	bin := batontest.Build(t, "")
	srv := batontest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	batontest.Exercise(t, srv.URL)
	served := batontest.Families(srv.Get(t, "/metrics"))
	for _, p := range unserved(queries, served) {
		t.Error(p)
	}
	// The dashboard covers what operators look at first.
	queried := map[string]bool{}
	for _, q := range queries {
		for _, n := range q.names {
			queried[strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count")] = true
		}
	}
	for _, want := range []string{"baton_locks_held", "baton_lock_wait_duration_seconds", "baton_limit_in_use",
		"baton_limit_waiters", "baton_jobs_total", "baton_jobs_running", "baton_job_queue_depth",
		"baton_jobs_oldest_running_age_seconds", "baton_job_dead_letter_depth",
		"baton_http_request_duration_seconds", "baton_store_shed_total"} {
		if !queried[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
}

// The tokenizer reads what the dashboard writes, and the check catches a renamed metric.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`max(baton_locks_held)`: {"baton_locks_held"},
		`histogram_quantile(0.95, sum by (route, le) (rate(baton_http_request_duration_seconds_bucket{route!~"a|b(c"}[$__rate_interval])))`: {"baton_http_request_duration_seconds_bucket"},
		`sum(rate(x_total{reason="overloaded"}[5m])) without (instance) / on (job) group_left (version) y offset 1h > bool 0.5e3`:           {"x_total", "y"},
		`count by (version, revision) (baton_build_info) and ignoring(a) z unless w or sum(rate(v[${__range}]))`:                            {"baton_build_info", "z", "w", "v"},
		`sum(a) by (kind) + b`: {"a", "b"},
	} {
		got, err := metricNames(expr)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, %v; want %q", expr, got, err, want)
		}
	}
	for _, bad := range []string{`sum(a`, `a{b="c}`, `rate(a[5m)`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%s): no error", bad)
		}
	}
	served := batontest.Families("# TYPE baton_h histogram\nbaton_h_bucket{le=\"1\"} 1\nbaton_h_sum 1\nbaton_h_count 1\n# TYPE baton_g gauge\nbaton_g 1\n")
	got := unserved([]query{{where: "p", names: []string{"baton_h_bucket", "baton_h_count", "baton_g", "baton_g_renamed", "baton_g_count"}}}, served)
	if len(got) != 2 || !strings.Contains(got[0], "baton_g_renamed") || !strings.Contains(got[1], "baton_g_count") {
		t.Errorf("unserved: %q", got)
	}
}
