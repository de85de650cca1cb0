package batontest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// Family is one metric family of a /metrics body: its type (from its # TYPE line) and the label
// names its samples carry (a histogram's le left out).
type Family struct {
	Type   string
	Labels []string
}

// Families parses the families of a /metrics body (Prometheus text format), by name.
func Families(body string) map[string]*Family {
	fams := map[string]*Family{}
	labels := map[string]map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				fams[f[0]] = &Family{Type: f[1]}
				labels[f[0]] = map[string]bool{}
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, "{ ")
		if i <= 0 {
			continue
		}
		name := line[:i]
		if _, ok := fams[name]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil {
					name = base
					break
				}
			}
		}
		if fams[name] == nil || line[i] != '{' {
			continue
		}
		// Label names: each is followed by =" ; values are quoted, with \" and \\ escaped.
		in := line[i+1:]
		for len(in) > 0 && in[0] != '}' {
			eq := strings.Index(in, `="`)
			if eq < 0 {
				break
			}
			if n := strings.TrimLeft(in[:eq], ","); n != "le" {
				labels[name][n] = true
			}
			j := eq + 2
			for j < len(in) && in[j] != '"' {
				if in[j] == '\\' {
					j++
				}
				j++
			}
			in = in[min(j+1, len(in)):]
		}
	}
	for name, f := range fams {
		for l := range labels[name] {
			f.Labels = append(f.Labels, l)
		}
		sort.Strings(f.Labels)
	}
	return fams
}

// Exercise drives a server at url (without auth) through what makes every labelled baton_
// family of its /metrics have series: a limit and a lease that holds a unit of it, a lock
// cycle, a refused acquire, and a job kind with one job completed and one failed for good (a
// dead letter), then waits until the store-read gauges show the kind. On a store without limits
// or without jobs, those steps are skipped: the families they would fill are not served there.
func Exercise(t testing.TB, url string) {
	t.Helper()
	call := func(method, path, body string, want ...int) map[string]any {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		ok := false
		for _, w := range want {
			ok = ok || resp.StatusCode == w
		}
		if !ok {
			t.Fatalf("%s %s %s: %d, want %v\n%s", method, path, body, resp.StatusCode, want, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	info := call("GET", "/v1/info", "", 200)
	if info["limits"] == true {
		call("PUT", "/v1/limits/exercise-pool", `{"capacity":2}`, 200)
		l := call("POST", "/v1/locks/acquire", `{"key":"exercise-pool","shared":true,"limits":["exercise-pool"],"ttl_ms":60000}`, 200)
		// Kept held: baton_limit_in_use reads 1 while the test scrapes.
		_ = l
	}
	l := call("POST", "/v1/locks/acquire", `{"key":"exercise/a","holder":"h1","ttl_ms":60000}`, 200)
	id := l["lease"].(map[string]any)["lease_id"].(string)
	call("POST", "/v1/locks/acquire", `{"key":"exercise/a","holder":"h2","ttl_ms":60000}`, 409)
	call("POST", "/v1/locks/release", fmt.Sprintf(`{"key":"exercise/a","lease_id":%q}`, id), 200)
	if info["jobs"] != true {
		return
	}
	call("PUT", "/v1/kinds/exercise.build", `{"max_attempts":1}`, 200)
	for i, end := range []string{"complete", "fail"} {
		extra := ""
		if end == "fail" {
			extra = `,"permanent":true`
		}
		call("POST", "/v1/jobs", fmt.Sprintf(`{"kind":"exercise.build","resource":"exercise/r%d"}`, i), 200, 201)
		jobs, _ := call("POST", "/v1/jobs/claim", `{"worker":"w","kinds":["exercise.build"],"limit":1}`, 200)["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("claim: %v jobs, want 1", jobs)
		}
		j := jobs[0].(map[string]any)
		call("POST", fmt.Sprintf("/v1/jobs/%d/%s", int64(j["id"].(float64)), end), fmt.Sprintf(`{"token":%d%s}`, int64(j["token"].(float64)), extra), 200)
	}
	// The store-read gauges are read at most once a second: wait until they show the dead letter.
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(raw), `baton_jobs_running{kind="exercise.build"} 0`) &&
			(!strings.Contains(string(raw), "baton_job_dead_letter_depth") || strings.Contains(string(raw), `baton_job_dead_letter_depth{kind="exercise.build"} 1`)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job gauges did not show the exercise's jobs after %s (hung):\n%s", hangGuard, raw)
		}
		time.Sleep(50 * time.Millisecond) // the gauges are read at scrape, at most once a second
	}
}
