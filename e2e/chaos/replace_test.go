package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	replaceKind      = "chaos-replace"
	replaceWorkers   = 2
	replaceResources = 3
	// replaceBurst submits come in a row on each resource, then replacePause: the burst's later
	// submits supersede its queued ones, and the next burst's first finds the last one running
	// (CMD writes for replaceSpan) and asks it to stop.
	replaceBurst = 3
	replacePause = 1500 * time.Millisecond
	replaceSpan  = "1s-3s"
)

// TestReplaceChaos: bursts of jobs of a kind of policy replace (latest wins) on a few
// resources, run by 2 `baton worker`s whose CMD is the fenced resource's client, under the jobs
// test's faults (kill -9 and SIGSTOP of workers, kill -9 of the server, PostgreSQL restarts)
// after a fault-free phase. Checked: no overlap and tokens in order per resource
// (checkFencing), no CMD outlives its worker (checkOrphans), and at the end (checkReplace) each
// resource's newest job succeeded and entered last, every other job succeeded or was
// superseded by a later job of its resource, none ran once a later job had entered, and the
// run both superseded queued jobs and stopped running ones.
func TestReplaceChaos(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		parallelStoreRun(t)
		runReplace(t, "sqlite://"+filepath.Join(t.TempDir(), "baton.db"), nil)
	})
	t.Run("postgres", func(t *testing.T) {
		parallelStoreRun(t)
		pg := startPostgres(t)
		runReplace(t, pg.url(), pg)
	})
}

func runReplace(t *testing.T, store string, pg *postgres) {
	dur := testDuration(t)
	started := time.Now()
	h := &jobHarness{t: t, res: newResource(t, started), pg: pg, dir: t.TempDir(), kind: replaceKind,
		workerEnv: []string{"BATON_CHAOS_SPAN=" + replaceSpan}}
	h.srv = startServer(t, store, "--reap-interval", "1s")
	h.srv.batonCLI("kinds", "set", replaceKind, "--policy", "replace", "--max-attempts", fmt.Sprint(jobMaxAttempts))
	ph := h.phases(dur)
	var wg sync.WaitGroup
	workers := h.startWorkers(replaceWorkers, &wg)
	faultKinds := h.jobFaults(workers)
	faults, tl, faultsDone := h.startFaults(ph, started, faultKinds, workers, &wg)

	r, notes := &report{}, &counter{}
	perResource := map[string][]int64{} // each resource's jobs in submission order
	seen := map[int64]bool{}
	for done := false; !done; {
		select {
		case <-faultsDone:
			done = true
		default:
		}
		for i := range replaceResources {
			res := fmt.Sprintf("chaos/replace%d", i)
			for range replaceBurst {
				seq := len(perResource[res])
				// The key makes a retry across a server restart submit once; it cannot name a
				// superseded job (only a later submit of this loop supersedes it).
				id := h.submitJob(map[string]any{"kind": replaceKind, "resource": res,
					"args": map[string]int{"seq": seq}, "idempotency_key": fmt.Sprintf("%s#%d", res, seq)})
				if seen[id] {
					r.violate("replace_submit", "%s: submit #%d answered job %d, already submitted", res, seq, id)
				}
				seen[id] = true
				perResource[res] = append(perResource[res], id)
			}
		}
		time.Sleep(replacePause) // the pause between bursts
	}

	drainFrom := time.Now()
	jobs := h.waitEnded(r) // bound by progress: no job ended for 2 minutes
	drained := time.Since(drainFrom)
	for _, w := range workers {
		w.mu.Lock()
		w.quit = true
		if w.cmd != nil {
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
		}
		w.mu.Unlock()
	}
	wg.Wait()

	events := h.res.snapshot()
	stalled := func(s *runSpan) bool {
		return h.stops.stopped(s.client, s.first-2*jobLeaseTTL, s.last)
	}
	checkFencing(events, stalled, tl, 2*jobLeaseTTL, r, notes)
	checkOrphans(events, r)
	workersLog, _ := os.ReadFile(filepath.Join(h.dir, "workers.log"))
	counts := &counter{}
	checkReplace(perResource, jobs, events, cancelStoppedJobs(string(workersLog)), r, counts)
	if dur == 0 {
		checkEveryFault(faultKinds, faults, r)
	}
	exits := &counter{}
	for _, e := range events {
		if e.Kind == "exit" {
			exits.add("exit_"+e.Status, 1)
		}
	}
	t.Logf("chaos replace summary (%s, %s, %d workers, %d resources, bursts of %d, lease TTL %s, fault-free until %s):\n"+
		"  jobs submitted: %d, drained in %s after the end, total %s\n  jobs: %s\n  CMD exits: %s\n  faults: %s\n  notes: %s\n  violations: %s",
		storeName(store), describeDuration(dur), replaceWorkers, replaceResources, replaceBurst, jobLeaseTTL, ph.faultFreeEnd.Round(time.Second),
		len(seen), drained.Round(time.Millisecond), time.Since(started).Round(time.Millisecond), counts, exits, faults, notes, r.violations.String())
	r.finish(t)
}
