package server_test

import (
	"strings"
	"testing"
)

// The limit gauges are read from the store at scrape: a limit of capacity 1 with one unit held
// and one acquire waiting for it shows in_use 1 and waiters 1; a limit nobody holds shows 0 and 0.
func TestMetricsLimits(t *testing.T) {
	f := newFixture(t, false)
	for _, name := range []string{"gpu", "idle"} {
		if r := f.do("PUT", "/v1/limits/"+name, "", "application/json", `{"capacity":1}`); r.status != 200 {
			t.Fatalf("set limit %s: %d %s", name, r.status, r.raw)
		}
	}
	r := f.post("/v1/locks/acquire", "", `{"key":"gpu","holder":"a","shared":true,"limits":["gpu"],"ttl_ms":60000}`)
	if r.status != 200 {
		t.Fatalf("first unit: %d %s", r.status, r.raw)
	}
	id := r.body["lease"].(map[string]any)["lease_id"].(string)
	got := make(chan response, 1)
	go func() {
		got <- f.post("/v1/locks/acquire", "", `{"key":"gpu","holder":"b","shared":true,"limits":["gpu"],"wait_ms":5000}`)
	}()
	<-f.refused // the second acquire was refused once: it waits in the limit's line
	m := f.do("GET", "/metrics", "", "", "")
	for _, want := range []string{
		`baton_limit_in_use{limit="gpu"} 1`,
		`baton_limit_waiters{limit="gpu"} 1`,
		`baton_limit_in_use{limit="idle"} 0`,
		`baton_limit_waiters{limit="idle"} 0`,
	} {
		if !strings.Contains(m.raw, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	f.post("/v1/locks/release", "", `{"key":"gpu","lease_id":"`+id+`"}`)
	if w := <-got; w.status != 200 {
		t.Fatalf("waiting acquire after the release: %d %s", w.status, w.raw)
	}
}
