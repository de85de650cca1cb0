package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// replicaCount `baton serve` replicas share one PostgreSQL.
	replicaCount = 3
	// replicaClients `baton run --lock lockKey` loops, client i at home on replica
	// i*replicaCount/replicaClients (two on each); replicaWorkers `baton worker`s, worker i at
	// home on replica i.
	replicaClients = 6
	replicaWorkers = 3
	// maintenanceKey is the servers' maintenance lease (baton.DefaultMaintenanceKey): its holder
	// reaps expired job attempts. Its TTL is baton.DefaultTTL (15 s), so a killed holder is
	// replaced about 15 s later.
	maintenanceKey = "baton/maintenance"
	// takeoverBound only fails a run in which no live replica took the maintenance lease over,
	// or reaped a killed worker's attempt, for this long (the lease's TTL is 15 s).
	takeoverBound = 2 * time.Minute
)

// TestReplicasChaos: three `baton serve` replicas on one PostgreSQL (the harness's own). Every
// client reaches them through the proxy of its home replica, which sends each new connection to
// that replica or, when it refuses, to the next one that accepts (a load balancer whose health
// check is the connect): a request retried after its replica died goes on at another. 6 `baton
// run --lock` loops on one key, two at home on each replica, and 3 `baton worker`s, one at home
// on each, run jobs over a few resources, submitted through the proxies in turn. After a
// fault-free phase, faults come one at a time: kill -9 and SIGSTOP of clients and workers,
// kill -9 of a replica (restarted after a short outage), and kill -9 of the replica that holds
// the maintenance lease, kept down until another replica holds it and has reaped the attempt of
// a worker killed for it.
//
// Checked, beside the checks of the locks and jobs tests (no overlap, tokens in order, the audit
// log, the line's order, the fault-free phase, every job succeeded in order):
//   - checkCrossReplicaWakeups: in the fault-free phase, a waiter on one replica is granted
//     after a release on another within wakeBound in most handoffs, far below the waiters'
//     fallback poll: the release's NOTIFY woke it;
//   - the maintenance lease moves: after its holder was killed, another replica holds it (the
//     store's lease, then its audit log) and reaps expired attempts (checkLeaderMoves).
func TestReplicasChaos(t *testing.T) {
	pg := startPostgres(t)
	runReplicas(t, pg)
}

// replicaHarness runs the locks test's clients and the jobs test's workers over the replicas.
type replicaHarness struct {
	t        *testing.T
	res      *resource
	replicas []*server
	proxies  []*proxy // proxies[i]: replica i first, then the others in turn
	locks    *lockHarness
	jobs     *jobHarness
	workers  []*workerSlot
	found    *report // violations found while the faults run

	mu         sync.Mutex
	home       map[string]int // lock client -> its home replica
	runReplica map[string]int // run ID -> its client's home replica
	pids       map[int]int    // PID of every replica process ever started -> its replica
	moves      []leaderMove
}

// leaderMove is one kill of the maintenance lease's holder, as the fault saw it.
type leaderMove struct {
	from, to int       // the killed replica, the replica seen holding the lease after it
	killedAt time.Time // when the holder was killed (wall clock, as the audit log's)
	reaped   bool      // an attempt was reaped while the killed replica was down
}

func runReplicas(t *testing.T, pg *postgres) {
	dur := testDuration(t)
	base := time.Now()
	res := newResource(t, base)
	h := &replicaHarness{t: t, res: res, found: &report{},
		home: map[string]int{}, runReplica: map[string]int{}, pids: map[int]int{}}
	for i := range replicaCount {
		h.replicas = append(h.replicas, startServer(t, pg.url(), "--reap-interval", "1s"))
		h.notePID(i)
	}
	for i := range replicaCount {
		var fallbacks []string
		for k := 1; k < replicaCount; k++ {
			fallbacks = append(fallbacks, h.replicas[(i+k)%replicaCount].addr)
		}
		h.proxies = append(h.proxies, startProxy(t, h.replicas[i].addr, fallbacks...))
	}
	h.replicas[0].batonCLI("kinds", "set", jobKind, "--max-attempts", fmt.Sprint(jobMaxAttempts))
	faultFreeEnd := res.now() + faultFree(dur, 10*time.Second)
	var stopAt time.Duration // 0: the bounded run
	if dur > 0 {
		stopAt = res.now() + dur
	}
	h.locks = &lockHarness{t: t, res: res, pg: pg, dir: t.TempDir(), done: make(chan struct{}), route: h.route}
	h.jobs = &jobHarness{t: t, res: res, srv: h.replicas[0], pg: pg, dir: t.TempDir()}

	clients := make([]*lockClient, replicaClients)
	var cwg sync.WaitGroup
	for i := range clients {
		c := &lockClient{name: fmt.Sprintf("c%d", i)}
		clients[i] = c
		h.mu.Lock()
		h.home[c.name] = i * replicaCount / replicaClients
		h.mu.Unlock()
		cwg.Go(func() { h.locks.loop(c) })
	}
	h.workers = make([]*workerSlot, replicaWorkers)
	var wwg sync.WaitGroup
	for i := range h.workers {
		w := &workerSlot{name: fmt.Sprintf("w%d", i)}
		h.workers[i] = w
		wwg.Go(func() { h.workerLoop(w, i%replicaCount) })
	}

	faults, tl := &counter{}, &timeline{}
	faultKinds := h.replicaFaults(clients)
	faultsDone := h.locks.done
	go func() {
		defer close(faultsDone)
		time.Sleep(faultFreeEnd - res.now()) // the fault-free phase is a schedule
		injectFaults(res, stopAt, &h.locks.quit, faultKinds, faults, tl, uint64(base.UnixNano()))
	}()
	t.Cleanup(func() { // after a fatal error, nothing may outlive the test
		h.locks.quit.Store(true)
		killRuns(clients)
		h.stopWorkers(syscall.SIGKILL)
		cwg.Wait()
		wwg.Wait()
		<-faultsDone
	})

	// Submit one job per resource about every 1.5 s until the faults have ended.
	perResource := map[string][]int64{}
	submitted := 0
submitting:
	for {
		select {
		case <-faultsDone:
			break submitting
		default:
		}
		for i := range jobResources {
			r := fmt.Sprintf("chaos/r%d", i)
			perResource[r] = append(perResource[r], h.submit(r, len(perResource[r])))
			submitted++
		}
		time.Sleep(1500 * time.Millisecond) // the submission rate
	}

	// A run waits at most --wait (30 s).
	if !waitLoops(&cwg, 3*time.Minute, func() { killRuns(clients) }) {
		t.Error("some baton run did not exit within 3 minutes of the end of the run")
	}
	r := h.found
	notes := &counter{}
	jobs := h.jobs.waitEnded(r) // every replica is up again: replica 0 lists them
	h.stopWorkers(syscall.SIGTERM)
	wwg.Wait()

	for _, j := range jobs {
		if j.State == "discarded" || j.State == "cancelled" || j.State == "skipped" {
			r.violate("job_lost", "job %d on %s ended %s: %+v", j.ID, j.Resource, j.State, j.Errors)
		}
	}
	attempts := &counter{}
	for _, j := range jobs {
		attempts.add("attempts", j.Attempt)
		for _, e := range j.Errors {
			attempts.add("error_"+e.Code, 1)
		}
	}
	if len(jobs) != submitted {
		r.violate("job_lost", "%d jobs submitted, %d listed", submitted, len(jobs))
	}

	// Fencing and overlap on every key, locks and jobs alike.
	events := res.snapshot()
	lockRuns := h.locks.runs
	byRun := map[string]runRecord{}
	for _, rr := range lockRuns {
		byRun[rr.id] = rr
	}
	stalled := func(s *runSpan) bool {
		if s.job != 0 { // a worker stopped between its claim and CMD's start stalls the run too
			return h.jobs.stops.stopped(s.client, s.first-2*jobLeaseTTL, s.last)
		}
		if rr, ok := byRun[s.run]; ok {
			return h.locks.stops.stopped(rr.client, rr.start, rr.end)
		}
		return h.locks.stops.stopped(s.client, s.first, s.last)
	}
	checkFencing(events, stalled, tl, 2*lockTTL, r, notes)
	checkOrphans(events, r)
	sp := spans(events)
	lockSpans := map[string]*runSpan{}
	for id, s := range sp {
		if s.key == lockKey {
			lockSpans[id] = s
		}
	}
	audit := h.replicas[0].events(lockKey)
	checkAudit(audit, lockRuns, lockSpans, r)
	checkLineOrder(lineCheck{audit: audit, runs: lockRuns, faultFreeEnd: faultFreeEnd}, r, notes)
	checkFaultFree(lockRuns, auditWaits(lockRuns, audit), faultFreeEnd, dur > 0, r, notes)
	var lockEvents []event
	for _, e := range events {
		if e.Key == lockKey {
			lockEvents = append(lockEvents, e)
		}
	}
	checkHistory(lockHistory{key: lockKey, ttl: lockTTL, runs: lockRuns, events: lockEvents, audit: audit, base: base,
		stalled: func(rr runRecord) bool { return h.locks.stops.stopped(rr.client, rr.start, rr.end) }, timeout: historyTimeout(dur)}, r, notes)
	checkJobOrder(perResource, sp, r)
	workersLog, _ := os.ReadFile(filepath.Join(h.jobs.dir, "workers.log"))
	late := lateHeartbeatJobs(string(workersLog))
	for _, e := range events {
		if e.At < faultFreeEnd && e.Kind == "exit" && e.Status != "ok" && e.Job != 0 {
			if late[e.Job] && dur == 0 {
				notes.add("faultfree_heartbeats_late", 1)
				continue
			}
			r.violate("faultfree_job_stopped", "%s (job %d, token %d) exit %s at %s without any fault", e.Run, e.Job, e.Token, e.Status, e.At)
		}
	}

	h.mu.Lock()
	runReplica := h.runReplica
	moves := h.moves
	pids := h.pids
	h.mu.Unlock()
	wakeups := checkCrossReplicaWakeups(audit, lockRuns, runReplica, base.Add(faultFreeEnd), r, notes)
	leader := checkLeaderMoves(h.replicas[0].events(maintenanceKey), moves, pids, r)
	if dur == 0 {
		checkEveryFault(faultKinds, faults, r)
		if len(moves) == 0 {
			r.violate("leader_never_moved", "the maintenance lease's holder was never killed")
		}
	}

	exits := &counter{}
	for _, rr := range lockRuns {
		exits.add(exitClass(rr.code), 1)
	}
	perReplica := make([]int, replicaCount)
	for _, i := range runReplica {
		perReplica[i]++
	}
	t.Logf("chaos replicas summary (postgres, %s, %d replicas, %d lock clients, %d workers, TTL %s, fault-free until %s):\n"+
		"  lock runs: %d (per home replica %v; CMDs that entered: %d; %s)\n  exit codes: %s\n  jobs: %d (%s)\n"+
		"  cross-replica wakeups: %s\n  maintenance lease: %s\n  faults: %s\n  notes: %s\n  violations: %s",
		describeDuration(dur), replicaCount, replicaClients, replicaWorkers, lockTTL, faultFreeEnd.Round(time.Second),
		len(lockRuns), perReplica, countEntered(lockSpans), handoverStats(events), exits, len(jobs), attempts,
		wakeups, leader, faults, notes, r.violations.String())
	r.finish(t)
}

// route sends every run of a lock client (run ID id) through the proxy of its home replica.
func (h *replicaHarness) route(c *lockClient, id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.home[c.name]
	h.runReplica[id] = i
	return h.proxies[i].url
}

// notePID records the PID of replica i's current process, to name the replica of a holder
// (the maintenance lease's holder is "host:pid:random").
func (h *replicaHarness) notePID(i int) {
	s := h.replicas[i]
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	h.mu.Lock()
	h.pids[pid] = i
	h.mu.Unlock()
}

// workerLoop runs one `baton worker` through the proxy of replica i and starts it again when a fault killed
// it, until told to quit.
func (h *replicaHarness) workerLoop(w *workerSlot, i int) {
	logf, err := os.OpenFile(filepath.Join(h.jobs.dir, "workers.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.t.Error(err)
		return
	}
	defer logf.Close()
	for {
		cmd := exec.Command(binary, "worker", "--server", h.proxies[i].url, "--kind", jobKind, "--concurrency", "2",
			"--lease-ttl", jobLeaseTTL.String(), "--shutdown-timeout", "5s", "--name", w.name, "--", fencedCmd)
		cmd.Env = append(os.Environ(), "BATON_CHAOS_CLIENT="+w.name, "BATON_CHAOS_RESOURCE="+h.res.url)
		cmd.Stdout, cmd.Stderr = logf, logf
		if !h.jobs.runIn(w, cmd) || w.quitting() {
			return
		}
		if code := exitCode(cmd.ProcessState); code == 2 || code == 127 || code == 126 {
			h.t.Errorf("baton worker %s exited %d (usage or CMD error), not restarted; see %s", w.name, code, logf.Name())
			return
		}
	}
}

func (h *replicaHarness) stopWorkers(sig syscall.Signal) {
	for _, w := range h.workers {
		w.mu.Lock()
		w.quit = true
		if w.cmd != nil {
			if sig == syscall.SIGKILL {
				_ = syscall.Kill(-w.cmd.Process.Pid, sig)
			} else {
				_ = w.cmd.Process.Signal(sig)
			}
		}
		w.mu.Unlock()
	}
}

// submit submits one job on resource through the replicas' proxies in turn (the next one after
// a failure), with an idempotency key, so that it happens once, and returns its ID.
func (h *replicaHarness) submit(resource string, seq int) int64 {
	h.t.Helper()
	return postJob(h.t, map[string]any{"kind": jobKind, "resource": resource,
		"args": map[string]int{"seq": seq}, "idempotency_key": fmt.Sprintf("%s#%d", resource, seq)},
		func(attempt int) string { return h.proxies[(seq+attempt)%replicaCount].url })
}

// replicaFaults: kill -9 and SIGSTOP of a lock client and of a worker, kill -9 of a replica
// (down 0.5-3 s, then restarted on its address), and kill -9 of the maintenance lease's holder
// (killLeader).
func (h *replicaHarness) replicaFaults(clients []*lockClient) []fault {
	pickClient := func(rng *rand.Rand) (string, *exec.Cmd) {
		c := clients[rng.IntN(len(clients))]
		return c.name, c.current()
	}
	pickWorker := func(rng *rand.Rand) (string, *exec.Cmd) {
		w := h.workers[rng.IntN(len(h.workers))]
		return w.name, w.current()
	}
	fs := processFaults("client", pickClient, lockTTL, h.res, &h.locks.stops)
	fs = append(fs, processFaults("worker", pickWorker, jobLeaseTTL, h.res, &h.jobs.stops)...)
	return append(fs,
		fault{"kill9_replica", func(rng *rand.Rand) bool {
			i := rng.IntN(replicaCount)
			h.replicas[i].kill9()
			time.Sleep(between(rng, 500*time.Millisecond, 3*time.Second)) // the outage's length
			h.restart(i)
			return true
		}},
		fault{"kill9_leader", h.killLeader})
}

// restart starts replica i again after a kill.
func (h *replicaHarness) restart(i int) {
	if err := h.replicas[i].start(); err != nil {
		h.t.Errorf("restarting replica %d: %v", i, err)
		return
	}
	h.notePID(i)
}
