package server_test

import (
	"regexp"
	"strings"
	"testing"
)

// msTime is the API's one time format: RFC 3339 in UTC with exactly three fraction digits.
var msTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// Lease and event times have milliseconds like job times; problem details carry no Go package
// prefix.
func TestTimesAndDetailsAreUniform(t *testing.T) {
	f := newFixture(t, false)
	r := f.post("/v1/locks/acquire", "", `{"key":"k","holder":"h","ttl_ms":60000}`)
	lease, _ := r.body["lease"].(map[string]any)
	if r.status != 200 || lease == nil {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	for _, field := range []string{"acquired_at", "expires_at"} {
		if s, _ := lease[field].(string); !msTime.MatchString(s) {
			t.Errorf("lease %s = %q, want RFC 3339 UTC with milliseconds", field, s)
		}
	}
	r = f.post("/v1/locks/acquire", "", `{"key":"k","holder":"other"}`)
	if s, _ := r.body["expires_at"].(string); r.status != 409 || !msTime.MatchString(s) {
		t.Errorf("lock_held problem: %d %s, want expires_at with milliseconds", r.status, r.raw)
	}
	if d, _ := r.body["detail"].(string); !strings.HasPrefix(d, `lock "k" held by "h"`) {
		t.Errorf("lock_held detail = %q, want no package prefix", d)
	}
	r = f.do("GET", "/v1/events", "", "", "")
	events, _ := r.body["events"].([]any)
	if r.status != 200 || len(events) == 0 {
		t.Fatalf("events: %d %s", r.status, r.raw)
	}
	for _, e := range events {
		if s, _ := e.(map[string]any)["at"].(string); !msTime.MatchString(s) {
			t.Errorf("event at = %q, want RFC 3339 UTC with milliseconds", s)
		}
	}

	jf := newJobFixture(t, false)
	r = jf.post("/v1/jobs", "", `{"kind":"nope","resource":"r"}`)
	d, _ := r.body["detail"].(string)
	if r.status != 400 || d != `kind must name a registered kind ("nope" is not; register it first)` {
		t.Errorf("unknown kind: %d %s", r.status, r.raw)
	}
	jf.post("/v1/jobs", "", `{"kind":"deploy","resource":"busy"}`)
	r = jf.post("/v1/jobs", "", `{"kind":"deploy","resource":"busy"}`)
	if d, _ := r.body["detail"].(string); r.status != 409 || strings.Contains(d, "baton:") || d == "" {
		t.Errorf("resource_busy: %d %s, want a detail without the package prefix", r.status, r.raw)
	}
	r = jf.post("/v1/jobs/batch", "", `{"jobs":[{"kind":"build","resource":"b"},{"kind":"deploy","resource":"busy"}]}`)
	if d, _ := r.body["detail"].(string); r.status != 409 || strings.Contains(d, "baton:") || d == "" {
		t.Errorf("batch resource_busy: %d %s, want a detail without the package prefix", r.status, r.raw)
	}
}

// A query parameter given twice is refused, not half ignored.
func TestRepeatedQueryParameterIsRefused(t *testing.T) {
	jf := newJobFixture(t, false)
	for _, path := range []string{"/v1/jobs?state=available&state=running", "/v1/locks?prefix=a&prefix=b", "/v1/jobs?kind=build&kind=build"} {
		r := jf.get(path, "")
		field := strings.SplitN(strings.SplitN(path, "?", 2)[1], "=", 2)[0]
		if r.status != 400 || r.body["code"] != "invalid_argument" || r.body["field"] != field {
			t.Errorf("GET %s: %d %s, want a 400 naming %s", path, r.status, r.raw, field)
		}
	}
	if r := jf.get("/v1/jobs?state=available&kind=build", ""); r.status != 200 {
		t.Errorf("two different parameters: %d %s", r.status, r.raw)
	}
}
