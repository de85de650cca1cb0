package chaos

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
)

// beyondJobSpecs are the jobs TestBeyondChaos submits, one of each per round, on the keys of its
// lock clients (one line per key for leases and jobs): a shared job beside the shared and
// exclusive runs, a job of two keys among the runs of two keys, a job on a key of its own
// that takes a unit of the group's limit, and in the tree an exclusive job on the parent and a
// shared one on a child.
var beyondJobSpecs = []map[string]any{
	{"resource": "chaos/sx", "shared": true},
	{"resource": "chaos/b", "resources": []string{"chaos/a"}},
	{"resource": "chaos/gj", "limits": []string{beyondGroup}},
	{"resource": "chaos/tree/p"},
	{"resource": "chaos/tree/p/c2", "shared": true},
}

// beyondJobs runs the jobs of TestBeyondChaos: one `baton worker` (restarted when a fault
// kills it) whose CMD is fencedcmd, as in the jobs test.
type beyondJobs struct {
	jh     *jobHarness
	worker *workerSlot
	wg     sync.WaitGroup
	mu     sync.Mutex
	ids    []int64
}

func startBeyondJobs(h *lockHarness) *beyondJobs {
	b := &beyondJobs{jh: &jobHarness{t: h.t, res: h.res, srv: h.srv, pg: h.pg, dir: h.dir}, worker: &workerSlot{name: "w0"}}
	h.srv.batonCLI("kinds", "set", jobKind, "--max-attempts", fmt.Sprint(jobMaxAttempts))
	b.wg.Go(func() { b.jh.loop(b.worker) })
	return b
}

// submitRound submits one job of each spec; round numbers them (idempotency keys).
func (b *beyondJobs) submitRound(round int) {
	for i, spec := range beyondJobSpecs {
		job := map[string]any{"kind": jobKind, "args": map[string]int{"seq": round},
			"idempotency_key": fmt.Sprintf("beyond-%d-%d", i, round)}
		for k, v := range spec {
			job[k] = v
		}
		id := b.jh.submitJob(job)
		b.mu.Lock()
		b.ids = append(b.ids, id)
		b.mu.Unlock()
	}
}

// faults are kill -9 and SIGSTOP of the worker.
func (b *beyondJobs) faults() []fault {
	pick := func(*rand.Rand) (string, *exec.Cmd) { return b.worker.name, b.worker.current() }
	return processFaults("worker", pick, jobLeaseTTL, b.jh.res, &b.jh.stops)
}

// drain waits until every job submitted has ended (the bound is on progress: no job finished for
// 2 minutes), reports the jobs that did not end succeeded, stops the worker, and returns the
// jobs' attempts and errors for the summary.
func (b *beyondJobs) drain(r *report) *counter {
	jobs := b.jh.waitEnded(r)
	b.worker.mu.Lock()
	b.worker.quit = true
	if b.worker.cmd != nil {
		_ = b.worker.cmd.Process.Signal(syscall.SIGTERM)
	}
	b.worker.mu.Unlock()
	b.wg.Wait()
	b.mu.Lock()
	submitted := len(b.ids)
	b.mu.Unlock()
	if len(jobs) != submitted {
		r.violate("job_lost", "%d jobs submitted, %d listed", submitted, len(jobs))
	}
	c := &counter{}
	for _, j := range jobs {
		c.add("jobs", 1)
		c.add("attempts", j.Attempt)
		for _, e := range j.Errors {
			c.add("error_"+e.Code, 1)
		}
		if j.State != "succeeded" && j.State != "running" && j.State != "available" && j.State != "retryable" {
			r.violate("job_lost", "job %d on %s ended %s: %+v", j.ID, j.Resource, j.State, j.Errors)
		}
	}
	return c
}

// kill ends the worker at once (after a fatal error).
func (b *beyondJobs) kill() {
	b.worker.mu.Lock()
	b.worker.quit = true
	if b.worker.cmd != nil {
		_ = syscall.Kill(-b.worker.cmd.Process.Pid, syscall.SIGKILL)
	}
	b.worker.mu.Unlock()
	b.wg.Wait()
}
