package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
)

// Bad requests against the real binary: each gets its documented problem, the server stays up,
// and nothing is written.
func TestBadRequestsAgainstTheBinary(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			badRequests(t, storeURL(t))
		})
	}
}

func badRequests(t *testing.T, storeURL string) {
	auth := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(auth, []byte("reader read "+server.HashToken("r-tok")+"\nwriter write "+server.HashToken("w-tok")+
		"\nops admin "+server.HashToken("a-tok")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, storeURL, "--auth-file", auth)
	cases := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"malformed JSON", "POST", "/v1/locks/acquire", "w-tok", `{"key":`, 400, "invalid_argument"},
		{"wrong types", "POST", "/v1/locks/acquire", "w-tok", `{"key":["a"]}`, 400, "invalid_argument"},
		{"unknown field", "POST", "/v1/locks/acquire", "w-tok", `{"key":"k","owner":"me"}`, 400, "invalid_argument"},
		// Over the 64 KiB limit, but small enough to be in the socket's buffers when the 413
		// comes: the server reads the rest of a refused body for only 500 ms before it closes
		// the connection, which a slow 1 MiB upload on a loaded machine can outlast (the answer
		// is then lost to the reset).
		{"huge body", "POST", "/v1/locks/acquire", "w-tok", `{"key":"` + strings.Repeat("k", 100<<10) + `"}`, 413, "body_too_large"},
		{"invalid key", "POST", "/v1/locks/acquire", "w-tok", `{"key":"a\nb"}`, 400, "invalid_argument"},
		{"missing token", "POST", "/v1/locks/acquire", "", `{"key":"k"}`, 401, "unauthorized"},
		{"wrong token", "POST", "/v1/locks/acquire", "guess", `{"key":"k"}`, 401, "unauthorized"},
		{"read token writes", "POST", "/v1/locks/acquire", "r-tok", `{"key":"k"}`, 403, "forbidden"},
		{"non-admin force-release", "POST", "/v1/locks/force-release", "w-tok", `{"key":"k","reason":"r"}`, 403, "forbidden"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v (did the server die?)", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), `"code":"`+c.code+`"`) ||
			resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, body, c.status, c.code)
		}
	}
	// Bytes that are not Unicode text: PostgreSQL refused such filters itself (a 503 and an ERROR
	// log), and encoding/json turned such body strings into U+FFFD (another key than the one sent).
	nonText := []struct {
		name, method, path, body, field string
	}{
		{"NUL in list prefix", "GET", "/v1/locks?prefix=a%00", "", "prefix"},
		{"invalid UTF-8 list prefix", "GET", "/v1/locks?prefix=%FF", "", "prefix"},
		{"invalid UTF-8 list cursor", "GET", "/v1/locks?cursor=k%C3", "", "cursor"},
		{"NUL in list holder", "GET", "/v1/locks?holder=%00", "", "holder"},
		{"bad escape in list holder", "GET", "/v1/locks?holder=%zz", "", "holder"},
		{"invalid UTF-8 events key", "GET", "/v1/events?key=%FF", "", "key"},
		{"NUL in jobs resource", "GET", "/v1/jobs?resource=r%00", "", "resource"},
		{"invalid UTF-8 resources prefix", "GET", "/v1/resources?prefix=%FF", "", "prefix"},
		{"invalid UTF-8 key in path", "GET", "/v1/locks/a%FF", "", "key"},
		{"raw 0xFF in key", "POST", "/v1/locks/acquire", "{\"key\":\"a\xffb\"}", "key"},
		{"surrogate escape in key", "POST", "/v1/locks/acquire", `{"key":"a\ud800b"}`, "key"},
		{"raw 0xFF in holder", "POST", "/v1/locks/acquire", "{\"key\":\"k\",\"holder\":\"\xff\"}", "holder"},
		{"surrogate escape in metadata", "POST", "/v1/locks/acquire", `{"key":"k","metadata":{"a":"\udc00"}}`, "metadata"},
		{"NUL in metadata", "POST", "/v1/locks/acquire", `{"key":"k","metadata":{"a":"\u0000"}}`, "metadata"},
		{"NUL in force-release reason", "POST", "/v1/locks/force-release", `{"key":"k","reason":"a\u0000"}`, "reason"},
		{"raw 0xFF in resource", "POST", "/v1/jobs", "{\"kind\":\"k\",\"resource\":\"r\xff\"}", "resource"},
		{"surrogate escape in args", "POST", "/v1/jobs", `{"kind":"k","resource":"r","args":{"a":"\ud800"}}`, "args"},
		{"raw 0xFF in kind", "POST", "/v1/jobs", "{\"kind\":\"k\xff\",\"resource\":\"r\"}", "kind"},
		{"raw 0xFF in claim kinds", "POST", "/v1/jobs/claim", "{\"worker\":\"w\",\"kinds\":[\"\xff\"]}", "kinds"},
		{"surrogate escape in purge resource", "POST", "/v1/dlq/purge", `{"resource":"\ud800"}`, "resource"},
	}
	for _, c := range nonText {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer a-tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v (did the server die?)", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"invalid_argument"`) ||
			!strings.Contains(string(body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want 400 invalid_argument naming %q", c.name, resp.StatusCode, body, c.field)
		}
	}
	if out, _ := os.ReadFile(s.log.Name()); strings.Contains(string(out), "level=ERROR") || strings.Contains(string(out), `"level":"ERROR"`) {
		t.Errorf("bad requests logged errors:\n%s", out)
	}
	req, _ := http.NewRequest("GET", s.url+"/v1/locks", nil)
	req.Header.Set("Authorization", "Bearer r-tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The only lease is the server's own: the job maintenance leader's.
	var list struct {
		Leases []struct {
			Key string `json:"key"`
		} `json:"leases"`
	}
	if err := json.Unmarshal(body, &list); resp.StatusCode != 200 || err != nil {
		t.Fatalf("after bad requests: %d %s (%v)", resp.StatusCode, body, err)
	}
	for _, l := range list.Leases {
		if l.Key != "baton/maintenance" {
			t.Fatalf("after bad requests: %s; want no lease but baton/maintenance", body)
		}
	}
}

// The curl examples of docs/http-api.md work as written: every line of its ```sh blocks runs in
// one bash session, with BATON set to the server's URL, and must succeed.
func TestDocsCurlExamples(t *testing.T) {
	t.Parallel()
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	f, err := os.Open("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	in, blocks := false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```sh":
			in = true
			blocks++
		case in && line == "```":
			in = false
		case in:
			script.WriteString(line + "\n")
		}
	}
	if blocks == 0 {
		t.Fatal("docs/http-api.md has no sh examples")
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Env = append(os.Environ(), "BATON="+s.url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the examples failed: %v\n--- script\n%s--- output\n%s", err, script.String(), out)
	}
	t.Logf("%d blocks ran:\n%s", blocks, out)
}

// The audit log through the CLI: a force-release shows who (the admin token's name) and why;
// the log needs an admin token.
func TestAuditLogThroughTheCLI(t *testing.T) {
	t.Parallel()
	auth := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(auth, []byte("ci write "+server.HashToken("w-tok")+"\nops admin "+server.HashToken("a-tok")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "sqlite://"+filepath.Join(t.TempDir(), "b.db"), "--auth-file", auth)
	ctx := context.Background()
	if code, out := s.baton(ctx, []string{"BATON_TOKEN=w-tok"}, "locks", "acquire", "db/main", "--holder", "job-9", "--ttl", "1m"); code != 0 {
		t.Fatalf("acquire: %d %s", code, out)
	}
	if code, out := s.baton(ctx, []string{"BATON_TOKEN=w-tok"}, "locks", "force-release", "db/main", "--reason", "x"); code != 77 {
		t.Fatalf("force-release with a write token: %d %s; want 77", code, out)
	}
	if code, out := s.baton(ctx, []string{"BATON_TOKEN=a-tok"}, "locks", "force-release", "db/main", "--reason", "runner wedged"); code != 0 {
		t.Fatalf("force-release: %d %s", code, out)
	}
	code, out := s.baton(ctx, []string{"BATON_TOKEN=a-tok"}, "events", "--key", "db/main", "-o", "json")
	if code != 0 {
		t.Fatalf("events: %d %s", code, out)
	}
	var evs []struct{ Kind, Holder, Actor, Reason string }
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("events -o json: %v\n%s", err, out)
	}
	// Newest first.
	if len(evs) != 2 || evs[1].Kind != "acquire" || evs[1].Holder != "job-9" ||
		evs[0].Kind != "force_release" || evs[0].Actor != "ops" || evs[0].Reason != "runner wedged" {
		t.Fatalf("audit log = %+v", evs)
	}
	if code, out := s.baton(ctx, []string{"BATON_TOKEN=w-tok"}, "events"); code != 77 {
		t.Fatalf("events with a write token: %d %s; want 77", code, out)
	}
}
