package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// destroyScript is a job that must never overlap another on its resource: mkdir is atomic, so a
// second job inside at once leaves a line in $DIR/overlaps. It records the order of entry.
const destroyScript = `
if ! mkdir "$DIR/in-$BATON_RESOURCE" 2>/dev/null; then echo "overlap: job $BATON_JOB_ID" >> "$DIR/overlaps"; exit 99; fi
echo "$BATON_JOB_ID $BATON_FENCING_TOKEN" >> "$DIR/order"
sleep 0.2
rmdir "$DIR/in-$BATON_RESOURCE"
`

// Three DESTROY jobs submitted at once for one cluster, four worker processes: one at a time,
// in submission order, with increasing fencing tokens.
func TestJobsOneAtATimeInSubmissionOrder(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, storeURL(t))
			s.putKind(map[string]any{"name": "destroy"})
			dir := t.TempDir()
			var workers []*worker
			for range 4 {
				workers = append(workers, startWorker(t, s, dir, destroyScript, "--kind", "destroy", "--concurrency", "2"))
			}
			var wg sync.WaitGroup
			ids := make([]int64, 3)
			for i := range 3 {
				wg.Go(func() { ids[i] = s.submitJob("destroy", "cluster-1", nil).ID })
			}
			wg.Wait()
			js := s.waitJobs("resource=cluster-1", func(js []apiJob) bool { return len(js) == 3 && allFinal(js) })
			stopAll(workers...)
			for _, j := range js {
				if j.State != "succeeded" || j.Attempt != 1 {
					t.Errorf("job %d: %s after %d attempts, want succeeded after 1", j.ID, j.State, j.Attempt)
				}
			}
			if o, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
				t.Fatalf("DESTROY jobs overlapped:\n%s", o)
			}
			order := readLines(t, filepath.Join(dir, "order"))
			sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
			var prevTok uint64
			for i, l := range order {
				f := strings.Fields(l)
				id, _ := strconv.ParseInt(f[0], 10, 64)
				tok, _ := strconv.ParseUint(f[1], 10, 64)
				if i >= len(ids) || id != ids[i] || tok <= prevTok {
					t.Fatalf("ran %v; want jobs %v in submission order with increasing tokens", order, ids)
				}
				prevTok = tok
			}
			if len(order) != 3 {
				t.Fatalf("ran %v; want 3 runs", order)
			}
		})
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

// manyScript fails one attempt in five at random, records every start and end per resource, and
// detects overlap on its resource.
const manyScript = `
if ! mkdir "$DIR/in-$BATON_RESOURCE" 2>/dev/null; then echo "overlap: $BATON_RESOURCE job $BATON_JOB_ID" >> "$DIR/overlaps"; exit 99; fi
echo "$BATON_JOB_ID $BATON_JOB_ATTEMPT" >> "$DIR/log-$BATON_RESOURCE"
r=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
rmdir "$DIR/in-$BATON_RESOURCE"
if [ $((r % 5)) -eq 0 ]; then exit 1; fi
`

// 10 resources x 12 jobs, 8 workers in 2 processes, random failures: every job ends final, no
// resource ever runs two jobs at once, per-resource order holds, retries are counted. The soak
// variant (make soak) runs 50 x 40.
func TestJobsManyResourcesWithFailures(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			manyResourcesWithFailures(t, storeURL(t), 10, 12)
		})
	}
}

func TestSoakJobsManyResourcesWithFailures(t *testing.T) {
	soakOnly(t)
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) { manyResourcesWithFailures(t, storeURL(t), 50, 40) })
	}
}

func manyResourcesWithFailures(t *testing.T, storeURL string, resources, perResource int) {
	s := startServer(t, storeURL)
	s.putKind(map[string]any{"name": "op", "max_attempts": 6})
	dir := t.TempDir()
	// Submit first, per resource in order, one submitter per resource at once.
	var wg sync.WaitGroup
	submitted := make([][]int64, resources)
	for r := range resources {
		wg.Go(func() {
			for range perResource {
				submitted[r] = append(submitted[r], s.submitJob("op", fmt.Sprintf("res-%d", r), nil).ID)
			}
		})
	}
	wg.Wait()
	w1 := startWorker(t, s, dir, manyScript, "--kind", "op", "--concurrency", "4")
	w2 := startWorker(t, s, dir, manyScript, "--kind", "op", "--concurrency", "4")
	js := s.waitJobs("kind=op", func(js []apiJob) bool { return len(js) == resources*perResource && allFinal(js) })
	stopAll(w1, w2)
	if o, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
		t.Fatalf("jobs overlapped on a resource:\n%s", o)
	}
	attempts := map[int64]int{}
	retries := 0
	for _, j := range js {
		if j.State != "succeeded" && j.State != "discarded" {
			t.Errorf("job %d ended %s", j.ID, j.State)
		}
		attempts[j.ID] = j.Attempt
		retries += j.Attempt - 1
		if len(j.Errors) != j.Attempt-boolInt(j.State == "succeeded") {
			t.Errorf("job %d: %d attempts, %s, but %d errors recorded", j.ID, j.Attempt, j.State, len(j.Errors))
		}
	}
	starts := 0
	for r := range resources {
		lines := readLines(t, filepath.Join(dir, fmt.Sprintf("log-res-%d", r)))
		starts += len(lines)
		// Per resource, runs follow submission order: job i+1 never starts before job
		// i has run its last attempt.
		idx := 0
		seen := map[int64]int{}
		for _, l := range lines {
			f := strings.Fields(l)
			id, _ := strconv.ParseInt(f[0], 10, 64)
			for idx < len(submitted[r]) && submitted[r][idx] != id {
				if seen[submitted[r][idx]] != attempts[submitted[r][idx]] {
					t.Fatalf("res-%d: job %d started before job %d finished its %d attempts (ran %d)",
						r, id, submitted[r][idx], attempts[submitted[r][idx]], seen[submitted[r][idx]])
				}
				idx++
			}
			if idx == len(submitted[r]) {
				t.Fatalf("res-%d: job %d ran out of order", r, id)
			}
			seen[id]++
		}
	}
	if starts != resources*perResource+retries {
		t.Fatalf("%d runs logged; the API counts %d jobs + %d retries", starts, resources*perResource, retries)
	}
	if retries == 0 {
		// One attempt in five fails: with 120 jobs, no retry at all has odds below 1e-11.
		t.Fatal("no retries happened: the failure injection is broken")
	}
	t.Logf("%d jobs, %d retries, %d runs", len(js), retries, starts)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A worker process killed with SIGKILL mid-job: once the job's lease expires the reaper ends the
// attempt (worker_timeout), another worker retries it, and the resource is not left stuck.
func TestJobsWorkerKilledMidJob(t *testing.T) {
	const ttl, reap = 3 * time.Second, time.Second
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, storeURL(t), "--reap-interval", reap.String())
			s.putKind(map[string]any{"name": "scale"})
			dir := t.TempDir()
			// The first run ever records its pid and hangs (exec: the pid is the hanging
			// process); every later run succeeds at once.
			script := `echo $$ > "$DIR/pid-$BATON_JOB_ID-$BATON_JOB_ATTEMPT"; touch "$DIR/started-$BATON_JOB_ID-$BATON_JOB_ATTEMPT"
if mkdir "$DIR/hang" 2>/dev/null; then exec sleep 120; fi`
			a := startWorker(t, s, dir, script, "--kind", "scale", "--lease-ttl", ttl.String())
			j := s.submitJob("scale", "cluster-9", nil)
			first := fmt.Sprintf("%d-1", j.ID)
			waitFile(t, filepath.Join(dir, "started-"+first))
			b := startWorker(t, s, dir, script, "--kind", "scale", "--lease-ttl", ttl.String())
			pid, _ := strconv.Atoi(strings.TrimSpace(string(mustRead(t, filepath.Join(dir, "pid-"+first)))))
			killed := time.Now()
			a.kill()
			waitFile(t, filepath.Join(dir, fmt.Sprintf("started-%d-2", j.ID)))
			took := time.Since(killed)
			js := s.waitJobs("resource=cluster-9", allFinal)
			if js[0].ID != j.ID || js[0].State != "succeeded" || js[0].Attempt != 2 || js[0].Errors[0].Code != "worker_timeout" {
				t.Fatalf("job after the crash: %+v; want succeeded on attempt 2 after worker_timeout", js[0])
			}
			// How soon the reaper acts after the lease expires depends on the machine's load: it
			// is logged (the server's error entry says how long after the expiry it reaped), not
			// checked against a deadline.
			t.Logf("reaped %s and retried by the other worker %s after SIGKILL (TTL %s, reap interval %s): %s",
				js[0].Errors[0].At.Sub(killed).Round(time.Millisecond), took.Round(time.Millisecond), ttl, reap, js[0].Errors[0].Message)
			// The killed worker's command died with it (it would overlap the retry otherwise).
			if err := syscallKill0(pid); err == nil {
				t.Errorf("attempt 1's command (pid %d) outlived its SIGKILLed worker", pid)
			}
			// The resource is not stuck: the next job runs.
			s.submitJob("scale", "cluster-9", nil)
			s.waitJobs("resource=cluster-9", func(js []apiJob) bool { return len(js) == 2 && allFinal(js) })
			b.stop()
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
