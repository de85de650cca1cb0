package server_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// durationSeries returns the label sets of baton_http_request_duration_seconds in a /metrics
// body (one per _count sample).
func durationSeries(raw string) []string {
	return regexp.MustCompile(`(?m)^baton_http_request_duration_seconds_count\{([^}]*)\}`).FindAllString(raw, -1)
}

// No request, with or without a token, can add a series to the request-duration histogram: the
// method label is one of the standard methods or "other", the route label a fixed route name,
// whatever the path (an API route, a key, the dashboard, an asset, an unknown path). Each new
// series costs memory for the life of the process, so made-up methods once grew the server
// without bound.
func TestHTTPMetricLabelsStayBounded(t *testing.T) {
	f := dashboardFixture(t) // with auth: the requests below have no token
	paths := []string{"/v1/locks/acquire", "/v1/locks/some/key", "/v1/jobs/17", "/", "/ui/app.js",
		"/no/such/path", "/healthz", "/metrics"}
	hc := &http.Client{}
	send := func(method, path string) {
		req, err := http.NewRequest(method, f.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Every standard method and one made-up one on every path: each label value that may exist.
	for _, p := range paths {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "MADEUP"} {
			send(m, p)
		}
	}
	before := durationSeries(f.do("GET", "/metrics", "", "", "").raw)
	for i := range 5000 {
		send(fmt.Sprintf("M%04d", i), paths[i%len(paths)])
	}
	after := durationSeries(f.do("GET", "/metrics", "", "", "").raw)
	if len(after) != len(before) {
		t.Fatalf("5,000 made-up methods changed the series of baton_http_request_duration_seconds from %d to %d", len(before), len(after))
	}
	methods := regexp.MustCompile(`method="([^"]*)"`)
	for _, s := range after {
		m := methods.FindStringSubmatch(s)
		if m == nil || !strings.Contains(" GET HEAD POST PUT DELETE PATCH OPTIONS other ", " "+m[1]+" ") {
			t.Errorf("series %s: method label not a standard method or other", s)
		}
		if strings.Contains(s, `route="/`) || strings.Contains(s, "some/key") {
			t.Errorf("series %s: route label is a path", s)
		}
	}
	for _, want := range []string{`route="dashboard"`, `route="no_such_route"`, `route="get"`, `method="other"`} {
		if !strings.Contains(strings.Join(after, "\n"), want) {
			t.Errorf("no series with %s among:\n%s", want, strings.Join(after, "\n"))
		}
	}
	t.Logf("baton_http_request_duration_seconds: %d series before and after 5,000 made-up methods", len(after))
}
