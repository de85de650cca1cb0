package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	jobWorkers     = 3
	jobResources   = 4
	jobLeaseTTL    = 2 * time.Second
	jobKind        = "chaos"
	jobMaxAttempts = 100
	// jobLockers `baton run --lock` loops take the jobs' resources as locks at the same time (a
	// key is one resource for leases and jobs), each CMD the same fenced client as the jobs'.
	jobLockers = 2
	// In the fault-free phase every locker takes jobLineKey, and jobLineLockers more lockers
	// join them until the phase ends: with four lockers on one key, two of them often wait in
	// its line at once (behind another, or behind a job), which the line check
	// (checkLineOrder) needs to compare grants at all.
	jobLineKey     = "chaos/r0"
	jobLineLockers = 2
)

// TestJobsChaos: jobs over a few resources, run by 3 `baton worker`s whose CMD is the fenced
// resource's client (per resource, token from BATON_FENCING_TOKEN), while 2 `baton run --lock`
// loops (4 on one resource in the fault-free phase) take the same resources as locks with the
// same client as CMD, with kill -9 and SIGSTOP of workers and server (and PostgreSQL) restarts
// after a fault-free third. Checked: no overlap and tokens in order per resource across jobs and
// locks (checkFencing), every job ends succeeded (none lost), jobs of a resource run in
// submission order, and in the fault-free phase lock waiters are granted in the order of their
// tickets in the resource's line, and on SQLite in order with its jobs (checkLine).
func TestJobsChaos(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		parallelStoreRun(t)
		runJobs(t, "sqlite://"+filepath.Join(t.TempDir(), "baton.db"), nil)
	})
	t.Run("postgres", func(t *testing.T) {
		parallelStoreRun(t)
		pg := startPostgres(t)
		runJobs(t, pg.url(), pg)
	})
}

type apiJob struct {
	ID       int64  `json:"id"`
	Resource string `json:"resource"`
	State    string `json:"state"`
	Attempt  int    `json:"attempt"`
	// CreatedAt is the job's arrival in its resource's line (the API's milliseconds).
	CreatedAt time.Time `json:"created_at"`
	// SupersededBy is the job that replaced this one (policy replace).
	SupersededBy int64 `json:"superseded_by"`
	Errors       []struct {
		Code string `json:"code"`
	} `json:"errors"`
}

type workerSlot struct {
	name string
	mu   sync.Mutex
	cmd  *exec.Cmd
	quit bool
}

func (w *workerSlot) current() *exec.Cmd {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmd
}

type jobHarness struct {
	t     *testing.T
	res   *resource
	srv   *server
	pg    *postgres
	dir   string
	quit  atomic.Bool // the test ended early (a fatal error): stop faults
	stops stopLog
	// kind is the jobs' kind (default jobKind); workerEnv is added to each worker's environment.
	kind      string
	workerEnv []string

	mu       sync.Mutex
	lockRuns []runRecord // the lockers' runs, for the line check
}

func runJobs(t *testing.T, store string, pg *postgres) {
	dur := testDuration(t)
	base := time.Now()
	h := &jobHarness{t: t, res: newResource(t, base), pg: pg, dir: t.TempDir()}
	h.srv = startServer(t, store, "--reap-interval", "1s")
	h.srv.batonCLI("kinds", "set", jobKind, "--max-attempts", fmt.Sprint(jobMaxAttempts))
	ph := h.phases(dur)
	faultFreeEnd := ph.faultFreeEnd

	var wg sync.WaitGroup
	workers := h.startWorkers(jobWorkers, &wg)
	lockers := make([]*workerSlot, jobLockers+jobLineLockers)
	var lwg sync.WaitGroup
	lockRuns := &counter{}
	for i := range lockers {
		l := &workerSlot{name: fmt.Sprintf("l%d", i)}
		lockers[i] = l
		faultFreeOnly := i >= jobLockers
		lwg.Go(func() { h.lockLoop(l, lockRuns, faultFreeEnd, faultFreeOnly) })
	}
	stopLockers := func() {
		for _, l := range lockers {
			l.mu.Lock()
			l.quit = true
			l.mu.Unlock()
		}
		lwg.Wait()
	}

	// Submit one job per resource about every 1.5 s, in order, until the end; seq[id] is the
	// job's place in its resource's queue.
	type sub struct {
		resource string
		seq      int
	}
	subs := map[int64]sub{}
	perResource := map[string][]int64{}
	acked := map[int64]time.Time{} // when each submit was acknowledged
	var submits []jobSubmit        // for the queue model (check 9)
	faultKinds := h.jobFaults(workers)
	faults, tl, faultsDone := h.startFaults(ph, base, faultKinds, append(workers, lockers...), &wg, &lwg)
submitting: // until the faults have ended
	for {
		select {
		case <-faultsDone:
			break submitting
		default:
		}
		for i := range jobResources {
			r := fmt.Sprintf("chaos/r%d", i)
			called := h.res.now()
			id := h.submit(r, len(perResource[r]))
			acked[id] = time.Now()
			submits = append(submits, jobSubmit{job: id, resource: r, call: called, ack: h.res.now()})
			subs[id] = sub{r, len(perResource[r])}
			perResource[r] = append(perResource[r], id)
		}
		time.Sleep(1500 * time.Millisecond) // the submission rate
	}

	stopLockers() // each ends after its current run
	r := &report{}
	notes := &counter{}
	// Every job must end succeeded. The jobs' states are the signal; the bound is on progress:
	// fail only if no job finished for 2 minutes (a job of a killed worker is retried within
	// its lease TTL plus the reap interval; a failed attempt after a backoff).
	var jobs []apiJob
	drainFrom := time.Now()
	jobs = h.waitEnded(r)
	drained := time.Since(drainFrom)
	stopFrom := time.Now()
	for _, w := range workers {
		w.mu.Lock()
		w.quit = true
		if w.cmd != nil {
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
		}
		w.mu.Unlock()
	}
	wg.Wait()
	stopped := time.Since(stopFrom)

	attempts := &counter{}
	for _, j := range jobs {
		attempts.add("attempts", j.Attempt)
		for _, e := range j.Errors {
			attempts.add("error_"+e.Code, 1)
		}
		if j.State == "discarded" || j.State == "cancelled" || j.State == "skipped" || j.State == "superseded" {
			r.violate("job_lost", "job %d on %s ended %s: %+v", j.ID, j.Resource, j.State, j.Errors)
		}
	}
	if len(jobs) != len(subs) {
		r.violate("job_lost", "%d jobs submitted, %d listed", len(subs), len(jobs))
	}

	events := h.res.snapshot()
	stalled := func(s *runSpan) bool {
		// A worker stopped between its claim and CMD's start stalls the run too.
		return h.stops.stopped(s.client, s.first-2*jobLeaseTTL, s.last)
	}
	checkFencing(events, stalled, tl, 2*jobLeaseTTL, r, notes)
	checkOrphans(events, r)
	sp := spans(events)
	checkJobOrder(perResource, sp, r)
	checkQueueHistory(submits, events, stalled, historyTimeout(dur), r, notes)
	h.checkLine(store, jobs, perResource, acked, faultFreeEnd, r, notes)
	if dur == 0 {
		checkEveryFault(faultKinds, faults, r)
	}
	// Without faults, no CMD is stopped or fenced out. As for locks (checkFaultFree), a CMD
	// stopped because no heartbeat got through before the local deadline (a starved worker or
	// server) fails soak runs and is a note in the bounded run.
	workersLog, _ := os.ReadFile(filepath.Join(h.dir, "workers.log"))
	late := lateHeartbeatJobs(string(workersLog))
	for _, e := range events {
		if e.At < faultFreeEnd && e.Kind == "exit" && e.Status != "ok" {
			if late[e.Job] && dur == 0 {
				notes.add("faultfree_heartbeats_late", 1)
				continue
			}
			r.violate("faultfree_job_stopped", "%s (job %d, token %d) exit %s at %s without any fault", e.Run, e.Job, e.Token, e.Status, e.At)
		}
	}
	byStatus := &counter{}
	for _, e := range events {
		if e.Kind == "exit" {
			byStatus.add("exit_"+e.Status, 1)
		}
	}
	t.Logf("chaos jobs summary (%s, %s, %d workers, %d resources, lease TTL %s, fault-free until %s):\n"+
		"  jobs: %d (CMD runs: %d), lock runs on the same resources: %s, drained in %s after the end, workers stopped in %s\n  CMD exits: %s\n  attempts and errors: %s\n  faults: %s\n  notes: %s\n  violations: %s",
		storeName(store), describeDuration(dur), jobWorkers, jobResources, jobLeaseTTL, faultFreeEnd.Round(time.Second),
		len(jobs), len(sp), lockRuns, drained.Round(time.Millisecond), stopped.Round(time.Millisecond), byStatus, attempts, faults, notes, r.violations.String())
	if r.violations.get("job_stuck") > 0 || r.violations.get("job_order") > 0 {
		out, _ := os.ReadFile(filepath.Join(h.dir, "workers.log"))
		t.Logf("worker log (tail):\n%s", tail(out, 6000))
	}
	r.finish(t)
}

// lateHeartbeatJobs are the jobs whose CMD a worker stopped because no heartbeat succeeded before
// its local deadline, as the workers' log says.
func lateHeartbeatJobs(log string) map[int64]bool {
	jobs := map[int64]bool{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "stopping CMD") || !strings.Contains(line, "no heartbeat succeeded") {
			continue
		}
		if m := jobField.FindStringSubmatch(line); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			jobs[id] = true
		}
	}
	return jobs
}

var jobField = regexp.MustCompile(`\bjob=(\d+)`)

// phases is a run's schedule on the resource's clock: faults start at faultFreeEnd and stop at
// stopAt (0: the bounded run, which stops once every fault kind was injected).
type phases struct{ faultFreeEnd, stopAt time.Duration }

// phases schedules a run of dur (0: the bounded run) from now: a fault-free phase, then faults.
func (h *jobHarness) phases(dur time.Duration) phases {
	p := phases{faultFreeEnd: h.res.now() + faultFree(dur, 5*time.Second)}
	if dur > 0 {
		p.stopAt = h.res.now() + dur
	}
	return p
}

// startFaults injects kinds after ph's fault-free phase, counting them in faults and tl, and
// closes done when they ended (seed: the run's start). It registers the test's cleanup: after a
// fatal error nothing may outlive the test, so it stops the faults, kills every slot's CMD and
// waits for wgs (the slots' loops) and for the faults to end.
func (h *jobHarness) startFaults(ph phases, seed time.Time, kinds []fault, slots []*workerSlot, wgs ...*sync.WaitGroup) (
	faults *counter, tl *timeline, done chan struct{}) {
	faults, tl, done = &counter{}, &timeline{}, make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(ph.faultFreeEnd - h.res.now()) // the fault-free phase is a schedule
		injectFaults(h.res, ph.stopAt, &h.quit, kinds, faults, tl, uint64(seed.UnixNano()))
	}()
	h.t.Cleanup(func() {
		h.quit.Store(true)
		for _, w := range slots {
			w.mu.Lock()
			w.quit = true
			if w.cmd != nil {
				_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
			}
			w.mu.Unlock()
		}
		for _, wg := range wgs {
			wg.Wait()
		}
		<-done
	})
	return faults, tl, done
}

// startWorkers starts n `baton worker` loops (loop), named w0, w1, …, each counted in wg until it
// ends.
func (h *jobHarness) startWorkers(n int, wg *sync.WaitGroup) []*workerSlot {
	workers := make([]*workerSlot, n)
	for i := range workers {
		w := &workerSlot{name: fmt.Sprintf("w%d", i)}
		workers[i] = w
		wg.Go(func() { h.loop(w) })
	}
	return workers
}

// loop runs one `baton worker` and starts it again when a fault killed it.
func (h *jobHarness) loop(w *workerSlot) {
	logf, err := os.OpenFile(filepath.Join(h.dir, "workers.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.t.Error(err)
		return
	}
	defer logf.Close()
	for {
		cmd := exec.Command(binary, "worker", "--server", h.srv.url, "--kind", h.kindName(), "--concurrency", "2",
			"--lease-ttl", jobLeaseTTL.String(), "--shutdown-timeout", "5s", "--name", w.name, "--", fencedCmd)
		cmd.Env = append(os.Environ(), "BATON_CHAOS_CLIENT="+w.name,
			"BATON_CHAOS_RESOURCE="+h.res.url)
		cmd.Env = append(cmd.Env, h.workerEnv...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if !h.runIn(w, cmd) || w.quitting() {
			return
		}
		if code := exitCode(cmd.ProcessState); code == 2 || code == 127 || code == 126 {
			h.t.Errorf("baton worker %s exited %d (usage or CMD error), not restarted; see %s", w.name, code, logf.Name())
			return
		}
	}
}

// kindName is the kind of the harness's jobs.
func (h *jobHarness) kindName() string {
	if h.kind != "" {
		return h.kind
	}
	return jobKind
}

// runIn runs cmd in its own process group as w's current process and waits for it; false if w
// was told to quit first (cmd is not started) or cmd could not start.
func (h *jobHarness) runIn(w *workerSlot, cmd *exec.Cmd) bool {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL} // see server.start
	w.mu.Lock()
	if w.quit {
		w.mu.Unlock()
		return false
	}
	if err := cmd.Start(); err != nil {
		w.mu.Unlock()
		h.t.Error(err)
		return false
	}
	w.cmd = cmd
	w.mu.Unlock()
	_ = cmd.Wait()
	w.mu.Lock()
	w.cmd = nil
	w.mu.Unlock()
	return true
}

// quitting reports whether w was told to quit.
func (w *workerSlot) quitting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.quit
}

// lockLoop runs `baton run --lock` on the jobs' resources, one after another, until told to quit
// (or, faultFreeOnly, once the fault-free phase has ended). Its CMD is the fenced client, so the
// resource sees locks and jobs on one key alike. Runs are paced (a short pause between them) so
// that the jobs keep draining. Runs that start in the fault-free phase take jobLineKey.
func (h *jobHarness) lockLoop(l *workerSlot, runs *counter, faultFreeEnd time.Duration, faultFreeOnly bool) {
	for n := 0; ; n++ {
		key := fmt.Sprintf("chaos/r%d", rand.IntN(jobResources))
		switch {
		case h.res.now() < faultFreeEnd:
			key = jobLineKey
		case faultFreeOnly:
			return
		}
		id := fmt.Sprintf("%s-%d", l.name, n)
		cmd := exec.Command(binary, "run", "--server", h.srv.url, "--lock", key, "--holder", holderPrefix+id,
			"--ttl", jobLeaseTTL.String(), "--wait", "20s", "--", fencedCmd)
		cmd.Env = append(os.Environ(), "BATON_CHAOS_CLIENT="+l.name, "BATON_CHAOS_RUN="+id,
			"BATON_CHAOS_SLOW=0", "BATON_CHAOS_RESOURCE="+h.res.url)
		start := h.res.now()
		if !h.runIn(l, cmd) {
			return
		}
		code := exitCode(cmd.ProcessState)
		h.mu.Lock()
		h.lockRuns = append(h.lockRuns, runRecord{client: l.name, id: id, start: start, end: h.res.now(), code: code})
		h.mu.Unlock()
		switch code {
		case 0:
			runs.add("ok", 1)
		case 2, 126, 127:
			h.t.Errorf("baton run --lock %s exited %d (usage or CMD error)", key, code)
			return
		default:
			runs.add(fmt.Sprintf("exit_%d", code), 1)
		}
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond) // pacing, not synchronisation
	}
}

// jobFaults are the faults of the jobs test: kill -9 and SIGSTOP of a worker, and the server's
// and the database's restarts.
func (h *jobHarness) jobFaults(workers []*workerSlot) []fault {
	pick := func(rng *rand.Rand) (string, *exec.Cmd) {
		w := workers[rng.IntN(len(workers))]
		return w.name, w.current()
	}
	return append(processFaults("worker", pick, jobLeaseTTL, h.res, &h.stops), storeFaults(h.t, h.srv, h.pg, nil)...)
}

// submit submits one job on resource over the HTTP API and returns its ID. The server may be
// restarting (a fault): the submit is retried with an idempotency key, so it happens once.
func (h *jobHarness) submit(resource string, seq int) int64 {
	h.t.Helper()
	return h.submitJob(map[string]any{"kind": jobKind, "resource": resource,
		"args": map[string]int{"seq": seq}, "idempotency_key": fmt.Sprintf("%s#%d", resource, seq)})
}

// submitJob submits the job body over the HTTP API (retried as submit is) and returns its ID.
func (h *jobHarness) submitJob(job map[string]any) int64 {
	h.t.Helper()
	return postJob(h.t, job, func(int) string { return h.srv.url })
}

// postJob posts the job body to /v1/jobs at url(attempt) until one answers with the job (a
// server restarting, a replica down: retried, with the job's idempotency key if it has one, so
// that it happens once), and returns its ID; it fails the test after 2 minutes of failures.
func postJob(t *testing.T, job map[string]any, url func(attempt int) string) int64 {
	t.Helper()
	body, _ := json.Marshal(job)
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 0; ; attempt++ {
		resp, err := http.Post(url(attempt)+"/v1/jobs", "application/json", bytes.NewReader(body))
		if err == nil {
			var j apiJob
			derr := json.NewDecoder(resp.Body).Decode(&j)
			resp.Body.Close()
			if (resp.StatusCode == 201 || resp.StatusCode == 200) && derr == nil {
				return j.ID
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("submitting a job on %s: %v", job["resource"], err)
		}
		time.Sleep(100 * time.Millisecond) // pacing the retries
	}
}

// jobs lists every job of the test's kind (all pages), retrying while the server restarts.
// waitEnded waits until every job submitted has ended and returns them; the bound is on progress:
// if no job finished for 2 minutes, each job that did not end succeeded is a violation
// (job_stuck) and it returns what it has.
func (h *jobHarness) waitEnded(r *report) []apiJob {
	lastProgress, lastDone := time.Now(), -1
	for {
		jobs := h.jobs()
		done := 0
		for _, j := range jobs {
			if jobEnded(j.State) {
				done++
			}
		}
		if done == len(jobs) {
			return jobs
		}
		if done != lastDone {
			lastProgress, lastDone = time.Now(), done
		}
		if time.Since(lastProgress) > 2*time.Minute {
			for _, j := range jobs {
				if j.State != "succeeded" {
					r.violate("job_stuck", "job %d on %s is %s after %d attempts, no job finished for 2 minutes", j.ID, j.Resource, j.State, j.Attempt)
				}
			}
			return jobs
		}
		time.Sleep(250 * time.Millisecond) // polling the jobs' states is the signal
	}
}

// jobEnded says whether a job in state is final.
func jobEnded(state string) bool {
	switch state {
	case "succeeded", "discarded", "cancelled", "skipped", "superseded":
		return true
	}
	return false
}

func (h *jobHarness) jobs() []apiJob {
	var all []apiJob
	after := int64(0)
	for {
		q := url.Values{"kind": {h.kindName()}, "limit": {"1000"}, "after": {fmt.Sprint(after)}}
		var page struct {
			Jobs      []apiJob `json:"jobs"`
			NextAfter int64    `json:"next_after"`
		}
		h.srv.getJSON("/v1/jobs?"+q.Encode(), &page)
		all = append(all, page.Jobs...)
		if page.NextAfter == 0 {
			sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
			return all
		}
		after = page.NextAfter
	}
}

// checkJobOrder: per resource, job i+1 never enters before job i's successful run exited, and
// job i never enters again once job i+1 has entered. perResource lists each resource's job IDs
// in submission order.
func checkJobOrder(perResource map[string][]int64, sp map[string]*runSpan, r *report) {
	byJob := map[int64][]*runSpan{}
	for _, s := range sp {
		byJob[s.job] = append(byJob[s.job], s)
	}
	for res, ids := range perResource {
		for i := 0; i+1 < len(ids); i++ {
			prevOK, prevLastEnter := time.Duration(-1), time.Duration(-1)
			for _, s := range byJob[ids[i]] {
				prevOK = max(prevOK, s.okExitAt)
				if s.entered {
					prevLastEnter = max(prevLastEnter, s.enterAt)
				}
			}
			nextFirst := time.Duration(-1)
			for _, s := range byJob[ids[i+1]] {
				if s.entered && (nextFirst < 0 || s.enterAt < nextFirst) {
					nextFirst = s.enterAt
				}
			}
			if nextFirst < 0 {
				continue // job_stuck or job_lost says so
			}
			if prevOK < 0 || nextFirst < prevOK || prevLastEnter > nextFirst {
				r.violate("job_order", "%s: job %d (#%d) entered at %s; job %d before it: last successful exit at %s, last enter at %s",
					res, ids[i+1], i+1, nextFirst, ids[i], prevOK, prevLastEnter)
			}
		}
	}
}

// checkLine is the jobs test's line check (checkLineOrder): per resource, the lockers' runs of
// the fault-free phase are granted in the order of their tickets; on SQLite, whose audit log is
// in commit order, also in order with the resource's jobs (the cross rule of checkLineOrder). On
// PostgreSQL the cross rule is not judged: under READ COMMITTED a claim or a grant reads the line
// in the snapshot its statement began with, so it misses a ticket (or a head's promotion)
// committed meanwhile, which docs/guarantees.md ("One line per resource") allows, and the audit
// log's IDs (a sequence) do not say which of two statements committed first.
func (h *jobHarness) checkLine(store string, jobs []apiJob, perResource map[string][]int64, acked map[int64]time.Time,
	faultFreeEnd time.Duration, r *report, notes *counter) {
	var audit []auditEvent
	for i := range jobResources {
		audit = append(audit, h.srv.events(fmt.Sprintf("chaos/r%d", i))...)
	}
	h.mu.Lock()
	c := lineCheck{audit: audit, runs: slices.Clone(h.lockRuns), faultFreeEnd: faultFreeEnd}
	h.mu.Unlock()
	if storeName(store) == "sqlite" {
		byID := map[int64]apiJob{}
		for _, j := range jobs {
			byID[j.ID] = j
		}
		c.jobs = map[int64]lineJob{}
		for res, ids := range perResource {
			clean := true
			for _, id := range ids {
				j := byID[id]
				clean = clean && j.State == "succeeded" && j.Attempt == 1 && len(j.Errors) == 0
				c.jobs[id] = lineJob{id: id, key: res, createdAt: j.CreatedAt, acked: acked[id], clean: clean}
			}
		}
	}
	checkLineOrder(c, r, notes)
}
