// Package prometheus holds example Prometheus rules for Baton; its test keeps them in step with
// what the server exports.
package prometheus

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batontest"
)

// rule is one alerting rule of a rules file, as far as the test needs it.
type rule struct {
	alert, expr, line string
}

// parseRules reads the alerting rules of a Prometheus rules file with a line-based reader (the
// module has no YAML library): "- alert: NAME" starts a rule; "expr:" is a one-line value or a
// block scalar ("|" or ">") whose lines are indented deeper than the key.
func parseRules(t *testing.T, text string) []rule {
	t.Helper()
	var out []rule
	lines := strings.Split(text, "\n")
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(trimmed, "- alert:"):
			out = append(out, rule{alert: strings.TrimSpace(strings.TrimPrefix(trimmed, "- alert:")), line: lines[i]})
		case strings.HasPrefix(trimmed, "expr:"):
			if len(out) == 0 || out[len(out)-1].expr != "" {
				t.Fatalf("line %d: expr outside a rule, or a second one: %q", i+1, lines[i])
			}
			v := strings.TrimSpace(strings.TrimPrefix(trimmed, "expr:"))
			if v == "|" || v == ">" {
				v = ""
				for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || indent(lines[i+1]) > indent(lines[i])) {
					i++
					v += " " + strings.TrimSpace(lines[i])
				}
			}
			out[len(out)-1].expr = strings.TrimSpace(v)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\bbaton_[a-z0-9_]+\b`)

// Every rule names at least one metric, and every metric it names is one a live `baton serve`
// exports: the rules cannot rot when a metric is renamed.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("baton-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules := parseRules(t, string(raw))
	for _, want := range []string{"BatonJobStuck", "BatonDeadLettersGrowing", "BatonLockContention"} {
		found := false
		for _, r := range rules {
			found = found || r.alert == want
		}
		if !found {
			t.Errorf("no rule %s", want)
		}
	}

	bin := batontest.Build(t, "")
	srv := batontest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	// The job gauges are reported per registered kind.
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/kinds/cluster.scale", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT kind: %v %v", resp, err)
	}
	resp.Body.Close()
	exported := batontest.MetricNames(srv.Get(t, "/metrics"))

	for _, r := range rules {
		if r.expr == "" {
			t.Errorf("rule %s has no expr", r.alert)
			continue
		}
		names := metricName.FindAllString(r.expr, -1)
		if len(names) == 0 {
			t.Errorf("rule %s names no baton metric: %s", r.alert, r.expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("rule %s names %s, which the server does not export", r.alert, n)
			}
		}
	}
}

// The reader sees what it should: a block scalar's lines, a one-line expr, every rule.
func TestParseRules(t *testing.T) {
	rules := parseRules(t, `groups:
  - name: g
    rules:
      - alert: A
        expr: up > 0
      - alert: B
        expr: |
          sum(rate(x[5m]))
            > 1
        for: 5m
`)
	if len(rules) != 2 || rules[0].expr != "up > 0" || rules[1].expr != "sum(rate(x[5m])) > 1" {
		t.Fatalf("parsed %+v", rules)
	}
}
