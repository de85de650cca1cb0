package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One resource, one line, through the binary: a `baton worker` job on cluster/eu-1 and a
// `baton run --lock cluster/eu-1` never run at once, whichever came first. The job's CMD and the
// run's CMD append their start and end to one file and each wait for a file the test creates, so
// that the run is known to be waiting (the server refused it) before the job ends; then, while the
// run holds the key, a claim of the next job on it finds nothing.
func TestLocksAndJobsExcludeThroughTheBinary(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			locksAndJobsExclude(t, storeURL(t))
		})
	}
}

func locksAndJobsExclude(t *testing.T, storeURL string) {
	s := startServer(t, storeURL)
	ctx := context.Background()
	dir := t.TempDir()
	if code, out := s.baton(ctx, nil, "kinds", "set", "apply"); code != 0 {
		t.Fatalf("kinds set: exit %d\n%s", code, out)
	}
	// Each CMD: log its start, say it started, wait for its go-ahead, log its end.
	section := func(name string) string {
		return `echo "` + name + ` start" >> "$DIR/log"; touch "$DIR/` + name + `.started"; ` +
			`while [ ! -e "$DIR/` + name + `.go" ]; do sleep 0.05; done; echo "` + name + ` end" >> "$DIR/log"`
	}
	release := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name+".go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := startWorker(t, s, dir, section("job$BATON_JOB_ID"), "--kind", "apply")

	// A job runs first; the lock waits for it.
	var job apiJob
	if job = s.submitJob("apply", "cluster/eu-1", nil); job.ID == 0 {
		t.Fatal("submit returned no job")
	}
	jobName := "job" + strconv.FormatInt(job.ID, 10)
	waitFile(t, filepath.Join(dir, jobName+".started"))
	run, runOut := startRun(t, s, dir, "run", "--lock", "cluster/eu-1", "--ttl", "10s", "--wait", hangGuard.String(),
		"--", "sh", "-c", section("run1"))
	s.waitRefusals(t, "cluster/eu-1")
	release(jobName)
	waitFile(t, filepath.Join(dir, "run1.started"))

	// Now the lock is held: a job submitted meanwhile is not claimed until the run ends. The
	// worker is stopped first, so that the test's own claims are the only ones.
	w.stop()
	job2 := s.submitJob("apply", "cluster/eu-1", nil)
	claim := func() []apiJob {
		t.Helper()
		var got struct {
			Jobs []apiJob `json:"jobs"`
		}
		if code := s.call("POST", "/v1/jobs/claim", map[string]any{"worker": "probe", "kinds": []string{"apply"}}, &got); code != 200 {
			t.Fatalf("POST /v1/jobs/claim: %d", code)
		}
		return got.Jobs
	}
	if js := claim(); len(js) != 0 {
		t.Fatalf("claimed %+v while baton run holds cluster/eu-1", js)
	}
	release("run1")
	if err := run.Wait(); err != nil {
		t.Fatalf("baton run: %v\n%s", err, runOut)
	}
	waitFor(t, "job "+strconv.FormatInt(job2.ID, 10)+" to be claimed once the run released cluster/eu-1", func() bool {
		js := claim()
		return len(js) == 1 && js[0].ID == job2.ID
	})

	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{jobName + " start", jobName + " end", "run1 start", "run1 end"}, "\n") + "\n"
	if string(b) != want {
		t.Fatalf("the job, the lock and the next job and the lock overlapped on cluster/eu-1:\n%s\nwant one after the other:\n%s", b, want)
	}
}
