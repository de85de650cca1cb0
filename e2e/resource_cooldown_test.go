package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
)

// The Kubernetes remediation controller's cooldown through the binary: a remediation of node-1
// runs (a `baton worker`); a second one within the cooldown is skipped with the time left, also
// after a server restart; a non-admin cannot clear it; an admin clears it (audited); the next
// one runs.
func TestResourceCooldownThroughTheBinary(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resourceCooldown(t, storeURL(t))
		})
	}
}

func resourceCooldown(t *testing.T, storeURL string) {
	auth := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(auth, []byte("ci write "+server.HashToken("w-tok")+"\nops admin "+server.HashToken("a-tok")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, storeURL, "--auth-file", auth)
	ctx := context.Background()
	admin, writer := []string{"BATON_TOKEN=a-tok"}, []string{"BATON_TOKEN=w-tok"}
	run := func(env []string, wantCode int, args ...string) string {
		t.Helper()
		code, out := s.baton(ctx, env, args...)
		if code != wantCode {
			t.Fatalf("baton %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, out)
		}
		return out
	}
	out := run(admin, 0, "kinds", "set", "remediate", "--policy", "skip", "--resource-cooldown", "1h")
	if !strings.Contains(out, "1h0m0s") {
		t.Fatalf("kinds set --resource-cooldown 1h printed:\n%s", out)
	}
	run(admin, 2, "kinds", "set", "remediate", "--resource-cooldown", "25h")

	dir := t.TempDir()
	w := startWorker(t, s, dir, `echo "$BATON_JOB_ID" >> "$DIR/ran"`, "--kind", "remediate", "--token", "w-tok")
	run(writer, 0, "jobs", "submit", "--kind", "remediate", "--resource", "node-1")
	waitSucceeded := func(n int) {
		t.Helper()
		// The jobs' state is the signal.
		waitFor(t, fmt.Sprintf("%d remediations of node-1 to succeed", n), func() bool {
			var js []json.RawMessage
			out := run(writer, 0, "jobs", "list", "--resource", "node-1", "--state", "succeeded", "-o", "json")
			if err := json.Unmarshal([]byte(out), &js); err != nil {
				t.Fatalf("jobs list -o json: %v\n%s", err, out)
			}
			return len(js) == n
		})
	}
	waitSucceeded(1)

	skipped := regexp.MustCompile(`skipped: resource node-1 was recently remediated; it cools down for another 5[0-9]m[0-9]+s \(until [0-9:]+Z\)`)
	if out := run(writer, 0, "jobs", "submit", "--kind", "remediate", "--resource", "node-1"); !skipped.MatchString(out) || !strings.Contains(out, "skipped") {
		t.Fatalf("second remediation within the cooldown:\n%s", out)
	}
	// Over HTTP: 201, the job skipped, the time left in its error entry.
	var j struct {
		State  string `json:"state"`
		Errors []struct {
			Code        string `json:"code"`
			Until       string `json:"until"`
			RemainingMs int64  `json:"remaining_ms"`
		} `json:"errors"`
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/jobs", strings.NewReader(`{"kind":"remediate","resource":"node-1"}`))
	req.Header.Set("Authorization", "Bearer w-tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code := resp.StatusCode
	if code != 201 || json.Unmarshal(body, &j) != nil || j.State != "skipped" || len(j.Errors) != 1 ||
		j.Errors[0].Code != "resource_cooldown" || j.Errors[0].Until == "" || j.Errors[0].RemainingMs < 50*60*1000 {
		t.Fatalf("POST /v1/jobs within the cooldown: %d %s", code, body)
	}
	if out := run(writer, 0, "resources", "show", "node-1"); !regexp.MustCompile(`5[0-9]m[0-9]+s left \(job 1\)`).MatchString(out) {
		t.Fatalf("resources show during the cooldown:\n%s", out)
	}

	// It is in the database: a restarted server still skips.
	w.stop()
	s.restart()
	if out := run(writer, 0, "jobs", "submit", "--kind", "remediate", "--resource", "node-1"); !skipped.MatchString(out) {
		t.Fatalf("remediation after a server restart, within the cooldown:\n%s", out)
	}

	run(writer, 77, "resources", "clear-cooldown", "node-1", "--reason", "checked")
	run(admin, 2, "resources", "clear-cooldown", "node-1")
	out = run(admin, 0, "resources", "clear-cooldown", "node-1", "--reason", "node-1 checked by hand")
	if !regexp.MustCompile(`^cleared the cooldown of node-1 after job 1 \(5[0-9]m[0-9]+s were left\)\n$`).MatchString(out) {
		t.Fatalf("clear-cooldown printed %q", out)
	}
	if out := run(admin, 3, "resources", "clear-cooldown", "node-1", "--reason", "again"); !strings.Contains(out, `resource "node-1" is not cooling down`) {
		t.Fatalf("clear-cooldown of a resource not cooling down:\n%s", out)
	}

	startWorker(t, s, dir, `echo "$BATON_JOB_ID" >> "$DIR/ran"`, "--kind", "remediate", "--token", "w-tok")
	out = run(writer, 0, "jobs", "submit", "--kind", "remediate", "--resource", "node-1", "-o", "json")
	var sub struct {
		Job struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
		} `json:"job"`
	}
	if json.Unmarshal([]byte(out), &sub) != nil || sub.Job.State != "available" {
		t.Fatalf("remediation after the clear:\n%s", out)
	}
	waitSucceeded(2)
	if ran := strings.Fields(string(mustRead(t, filepath.Join(dir, "ran")))); len(ran) != 2 {
		t.Fatalf("the worker ran jobs %v; want the first remediation and the one after the clear", ran)
	}

	var evs []struct{ Kind, Key, Actor, Reason string }
	if err := json.Unmarshal([]byte(run(admin, 0, "events", "--key", "node-1", "--oldest-first", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	// Each of the two remediations is claimed and completed (job_claim, job_complete) on either
	// side of the operator's clear (a job_renew, if a slow machine let a heartbeat happen, is
	// left out).
	var kinds []string
	var rest []struct{ Kind, Key, Actor, Reason string }
	for _, e := range evs {
		if e.Kind != "job_renew" {
			kinds, rest = append(kinds, e.Kind), append(rest, e)
		}
	}
	want := "job_claim job_complete resource_cooldown_cleared job_claim job_complete"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("audit log of node-1: %s; want %s\n%+v", got, want, evs)
	}
	if c := rest[2]; c.Actor != "ops" || c.Reason != "node-1 checked by hand" {
		t.Fatalf("the clear in the audit log: %+v; want by ops, with the reason", c)
	}
}
