package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A job run by `baton worker` leaves its claim, at most one renewal and its completion in the
// audit log, in that order, under the fencing token the command was given, and `baton events`
// shows them.
func TestJobAuditThroughWorker(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t))
			s.putKind(map[string]any{"name": "tf.apply"})
			dir := t.TempDir()
			// Long enough for a heartbeat (every TTL/3 = 1s) or two.
			w := startWorker(t, s, dir, `echo "$BATON_JOB_ID $BATON_FENCING_TOKEN $BATON_JOB_ATTEMPT" > "$DIR/ran"; sleep 2.5`,
				"--kind", "tf.apply", "--lease-ttl", "3s", "--grace", "1s")
			j := s.submitJob("tf.apply", "workspace/prod", nil)
			s.waitJobs("resource=workspace/prod", allFinal)
			w.stop()
			ran := strings.Fields(string(mustRead(t, filepath.Join(dir, "ran"))))
			if len(ran) != 3 || ran[0] != strconv.FormatInt(j.ID, 10) || ran[2] != "1" {
				t.Fatalf("the command saw %q; want job %d, a token, attempt 1", ran, j.ID)
			}
			token, _ := strconv.ParseUint(ran[1], 10, 64)

			ctx := context.Background()
			code, out := s.baton(ctx, nil, "events", "--key", "workspace/prod", "--oldest-first", "-o", "json")
			if code != 0 {
				t.Fatalf("baton events: exit %d\n%s", code, out)
			}
			var evs []struct {
				Kind    string `json:"kind"`
				Token   uint64 `json:"token"`
				JobID   int64  `json:"job_id"`
				JobKind string `json:"job_kind"`
				Attempt int    `json:"attempt"`
				Holder  string `json:"holder"`
				Outcome string `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(out), &evs); err != nil {
				t.Fatalf("baton events -o json: %v\n%s", err, out)
			}
			var kinds []string
			for _, e := range evs {
				kinds = append(kinds, e.Kind)
				if e.Token != token || e.JobID != j.ID || e.JobKind != "tf.apply" || e.Attempt != 1 || e.Holder == "" {
					t.Errorf("event %+v; want job %d, tf.apply, attempt 1, token %d, a worker", e, j.ID, token)
				}
			}
			got := strings.Join(kinds, ",")
			if got != "job_claim,job_complete" && got != "job_claim,job_renew,job_complete" {
				t.Fatalf("events %s; want job_claim, at most one job_renew, job_complete\n%s", got, out)
			}
			if last := evs[len(evs)-1]; last.Outcome != "succeeded" {
				t.Fatalf("completion outcome %q; want succeeded", last.Outcome)
			}
			// The table names the job and its outcome.
			code, out = s.baton(ctx, nil, "events", "--key", "workspace/prod")
			if code != 0 || !strings.Contains(out, "JOB") || !strings.Contains(out, strconv.FormatInt(j.ID, 10)+"#1") ||
				!strings.Contains(out, "succeeded") {
				t.Fatalf("baton events: exit %d; want the job %d#1 and its outcome:\n%s", code, j.ID, out)
			}
		})
	}
}
