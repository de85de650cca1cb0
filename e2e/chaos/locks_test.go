package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	lockClients = 8
	lockTTL     = 2 * time.Second
	lockKey     = "chaos/k1"
)

// TestLocksChaos: 8 clients loop `baton run --lock K --ttl 2s --wait 30s -- CMD` on one key
// through a proxy to one server; a first phase runs without faults, then faults come one at a
// time. See checkFencing, checkAudit and checkFaultFree for what must hold. Over SQLite, over a
// PostgreSQL and over a single redis-server (AOF, fsync always) of the harness's own.
func TestLocksChaos(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		parallelStoreRun(t)
		runLocks(t, "sqlite://"+filepath.Join(t.TempDir(), "baton.db"), nil, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		parallelStoreRun(t)
		pg := startPostgres(t)
		runLocks(t, pg.url(), pg, nil)
	})
	t.Run("redis", func(t *testing.T) {
		parallelStoreRun(t)
		rd := startRedis(t)
		runLocks(t, rd.url(), nil, rd)
	})
}

// runRecord is one `baton run` as the harness saw it.
type runRecord struct {
	client, id string
	start, end time.Duration
	startWall  time.Time
	code       int
	stderr     string
}

type lockClient struct {
	name string
	mu   sync.Mutex
	cmd  *exec.Cmd // the running baton run, nil between runs
}

func (c *lockClient) current() *exec.Cmd {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd
}

func (c *lockClient) set(cmd *exec.Cmd) {
	c.mu.Lock()
	c.cmd = cmd
	c.mu.Unlock()
}

type lockHarness struct {
	t     *testing.T
	res   *resource
	srv   *server
	px    *proxy
	pg    *postgres
	rd    *redisServer
	dir   string
	done  chan struct{} // closed when the faults have ended: the clients stop
	quit  atomic.Bool   // the test ended early (a fatal error): stop everything
	stops stopLog
	// route, if set, is the server URL of a client's next run (run ID id); else the proxy's.
	route func(c *lockClient, id string) string
	// clientArgv, if set, is the command line that runs c's baton (ending in the binary: one
	// under `ip netns exec`, one built with the chaosclock tag); else the harness's binary.
	clientArgv func(c *lockClient) []string

	mu   sync.Mutex
	runs []runRecord
}

func runLocks(t *testing.T, store string, pg *postgres, rd *redisServer) {
	lockRun(t, store, pg, rd, testDuration(t)).finish(t)
}

// lockRun runs the locks test for dur (0: the bounded run) and returns its checks' report.
func lockRun(t *testing.T, store string, pg *postgres, rd *redisServer, dur time.Duration) *report {
	base := time.Now()
	h := &lockHarness{t: t, res: newResource(t, base), pg: pg, rd: rd, dir: t.TempDir(), done: make(chan struct{})}
	h.srv = startServer(t, store)
	h.px = startProxy(t, h.srv.addr)
	faultFreeEnd := h.res.now() + faultFree(dur, 10*time.Second)
	var stopAt time.Duration // 0: the bounded run
	if dur > 0 {
		stopAt = h.res.now() + dur
	}

	var wg sync.WaitGroup
	clients := h.startClients(lockClients, &wg)
	faults, tl := &counter{}, &timeline{}
	faultKinds := h.lockFaults(clients)
	faultsDone := h.done
	h.startFaults(faultFreeEnd, stopAt, faultKinds, faults, tl, uint64(base.UnixNano()))
	t.Cleanup(func() { // after a fatal error, nothing may outlive the test
		h.quit.Store(true)
		killRuns(clients)
		wg.Wait()
		<-faultsDone
	})
	<-faultsDone
	// A run waits at most --wait (30 s).
	if !waitLoops(&wg, 3*time.Minute, func() { killRuns(clients) }) {
		t.Error("some baton run did not exit within 3 minutes of the end of the run")
	}

	r := &report{}
	notes := &counter{}
	events := h.res.snapshot()
	byRun := map[string]runRecord{}
	for _, rr := range h.runs {
		byRun[rr.id] = rr
	}
	stalled := func(s *runSpan) bool {
		rr, ok := byRun[s.run]
		if !ok {
			return h.stops.stopped(s.client, s.first, s.last)
		}
		return h.stops.stopped(rr.client, rr.start, rr.end)
	}
	checkFencing(events, stalled, tl, 2*lockTTL, r, notes)
	checkOrphans(events, r)
	sp := spans(events)
	// The Redis store keeps no audit log (Capabilities.Audit is false, GET /v1/events is
	// empty): check 3 is skipped there, and check 4 measures waits up to the CMD's first call
	// on the resource instead of up to the grant event.
	auditNote := "checked"
	var waits map[string]time.Duration
	var audit []auditEvent
	if rd != nil {
		auditNote = "skipped (the Redis store keeps no audit log; fencing and overlap checked on the resource)"
		waits = resourceWaits(h.runs, sp)
	} else {
		audit = h.srv.events(lockKey)
		checkAudit(audit, h.runs, sp, r)
		checkLineOrder(lineCheck{audit: audit, runs: h.runs, faultFreeEnd: faultFreeEnd}, r, notes)
		waits = auditWaits(h.runs, audit)
	}
	checkFaultFree(h.runs, waits, faultFreeEnd, dur > 0, r, notes)
	checkHistory(lockHistory{key: lockKey, ttl: lockTTL, runs: h.runs, events: events, audit: audit, base: base,
		stalled: func(rr runRecord) bool { return h.stops.stopped(rr.client, rr.start, rr.end) }, timeout: historyTimeout(dur)}, r, notes)
	if dur == 0 {
		checkEveryFault(faultKinds, faults, r)
	}

	exits := &counter{}
	for _, rr := range h.runs {
		exits.add(exitClass(rr.code), 1)
	}
	t.Logf("chaos locks summary (%s, %s, %d clients, TTL %s, fault-free until %s):\n"+
		"  runs: %d (CMDs that entered: %d; %s)\n  exit codes: %s\n  faults: %s\n  audit log: %s\n  notes: %s\n  violations: %s",
		storeName(store), describeDuration(dur), lockClients, lockTTL, faultFreeEnd.Round(time.Second),
		len(h.runs), countEntered(sp), handoverStats(events), exits, faults, auditNote, notes, r.violations.String())
	return r
}

func storeName(store string) string {
	name, _, _ := strings.Cut(store, ":")
	return name
}

func countEntered(sp map[string]*runSpan) int {
	n := 0
	for _, s := range sp {
		if s.entered {
			n++
		}
	}
	return n
}

// startClients starts n clients, c0 to c(n-1), each looping `baton run` (h.loop) in a
// goroutine of wg until the faults have ended.
func (h *lockHarness) startClients(n int, wg *sync.WaitGroup) []*lockClient {
	clients := make([]*lockClient, n)
	for i := range clients {
		c := &lockClient{name: fmt.Sprintf("c%d", i)}
		clients[i] = c
		wg.Go(func() { h.loop(c) })
	}
	return clients
}

// startFaults injects kinds (injectFaults) from faultFreeEnd until stopAt (0: the bounded run),
// and closes h.done, which ends the clients' loops, once the last fault is undone.
func (h *lockHarness) startFaults(faultFreeEnd, stopAt time.Duration, kinds []fault, faults *counter, tl *timeline, seed uint64) {
	go func() {
		defer close(h.done)
		time.Sleep(faultFreeEnd - h.res.now()) // the fault-free phase is a schedule
		injectFaults(h.res, stopAt, &h.quit, kinds, faults, tl, seed)
	}()
}

// loop runs `baton run --lock lockKey` again and again until the faults have ended.
func (h *lockHarness) loop(c *lockClient) {
	h.loopRuns(c, []string{"--lock", lockKey}, nil)
}

// loopRuns runs `baton run HOLDS... -- CMD` again and again until the faults have ended and,
// if more is set, while more(c) says so (the harness stops quit meanwhile).
func (h *lockHarness) loopRuns(c *lockClient, holds []string, more func(*lockClient) bool) {
	for n := 0; (!h.ended() || more != nil && more(c)) && !h.quit.Load(); n++ {
		id := fmt.Sprintf("%s-%d", c.name, n)
		slow := "0"
		if rand.IntN(3) == 0 {
			slow = "1"
		}
		errf, err := os.Create(filepath.Join(h.dir, id+".stderr"))
		if err != nil {
			h.t.Error(err)
			return
		}
		var srvURL string
		if h.route != nil {
			srvURL = h.route(c, id)
		} else {
			srvURL = h.px.url
		}
		argv := []string{binary}
		if h.clientArgv != nil {
			argv = h.clientArgv(c)
		}
		args := append(append(append([]string{}, argv[1:]...), "run", "--server", srvURL), holds...)
		cmd := exec.Command(argv[0], append(args, "--holder", holderPrefix+id,
			"--ttl", lockTTL.String(), "--wait", "30s", "--", fencedCmd)...)
		cmd.Env = append(os.Environ(), "BATON_CHAOS_CLIENT="+c.name,
			"BATON_CHAOS_RUN="+id, "BATON_CHAOS_SLOW="+slow, "BATON_CHAOS_RESOURCE="+h.res.url)
		cmd.Stderr = errf                                                                 // a file, not a pipe: an orphaned CMD cannot hold up Wait
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL} // see server.start
		start, startWall := h.res.now(), time.Now()
		if err := cmd.Start(); err != nil {
			errf.Close()
			h.t.Error(err)
			return
		}
		c.set(cmd)
		_ = cmd.Wait()
		c.set(nil)
		end := h.res.now()
		errf.Close()
		out, _ := os.ReadFile(errf.Name())
		os.Remove(errf.Name())
		h.mu.Lock()
		code := exitCode(cmd.ProcessState)
		h.runs = append(h.runs, runRecord{client: c.name, id: id, start: start, end: end, startWall: startWall,
			code: code, stderr: tail(out, 2000)})
		h.mu.Unlock()
		if code == 2 {
			h.t.Errorf("%s: baton run refused its arguments (exit 2); client %s stops:\n%s", id, c.name, tail(out, 2000))
			return
		}
		if code == 1 {
			// The server was unreachable (a fault): baton run gives up at once; pace the
			// retries as a real caller would instead of spinning.
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// waitLoops waits for the clients' loops (wg) to end. It is a failure bound: past bound it
// calls kill (the running baton runs), waits for the loops, and reports false.
func waitLoops(wg *sync.WaitGroup, bound time.Duration, kill func()) bool {
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
		return true
	case <-time.After(bound):
		kill()
		<-allDone
		return false
	}
}

// killRuns kills every client's running baton run with its process group.
func killRuns(clients []*lockClient) {
	for _, c := range clients {
		if cmd := c.current(); cmd != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// ended reports whether the faults have ended, and with them the run.
func (h *lockHarness) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// lockFaults are the faults of the locks test: those of every test, and a slow or cut network
// between the clients and the server.
func (h *lockHarness) lockFaults(clients []*lockClient) []fault {
	pick := func(rng *rand.Rand) (string, *exec.Cmd) {
		c := clients[rng.IntN(len(clients))]
		return c.name, c.current()
	}
	fs := processFaults("client", pick, lockTTL, h.res, &h.stops)
	fs = append(fs, storeFaults(h.t, h.srv, h.pg, h.rd)...)
	return append(fs, netFaults(h.px)...)
}

// netFaults are a slow network (every chunk delayed 50-700 ms for 2-5 s) and a cut one (every
// connection reset, new ones refused, for 0.5-4 s) between the clients and the server, at px.
func netFaults(px *proxy) []fault {
	return []fault{
		{"net_delay", func(rng *rand.Rand) bool {
			px.setDelay(between(rng, 50*time.Millisecond, 700*time.Millisecond))
			time.Sleep(between(rng, 2*time.Second, 5*time.Second))
			px.setDelay(0)
			return true
		}},
		{"net_cut", func(rng *rand.Rand) bool {
			px.setCut(true)
			time.Sleep(between(rng, 500*time.Millisecond, 4*time.Second))
			px.setCut(false)
			return true
		}},
	}
}

// checkAudit is check 3: every token a CMD saw was granted in the audit log (no grant lost
// across restarts), every run that exited 0 after a release the server acknowledged has its
// release event, and the audit log's grants carry strictly increasing, never reused tokens.
func checkAudit(audit []auditEvent, runs []runRecord, sp map[string]*runSpan, r *report) {
	granted := map[uint64]bool{}
	released := map[uint64]bool{}
	var last uint64
	for _, e := range audit {
		switch e.Kind {
		case "acquire", "expiry_takeover":
			if granted[e.Token] {
				r.violate("audit_token_reuse", "token %d granted twice (event %d)", e.Token, e.ID)
			} else if e.Token <= last {
				r.violate("audit_token_order", "event %d grants token %d after token %d", e.ID, e.Token, last)
			}
			granted[e.Token] = true
			last = max(last, e.Token)
		case "release":
			released[e.Token] = true
		}
	}
	for _, s := range sp {
		if !granted[s.token] {
			r.violate("grant_missing_in_audit", "%s ran with token %d, not granted in the audit log", s.run, s.token)
		}
	}
	for _, rr := range runs {
		s := sp[rr.id]
		if rr.code != 0 || s == nil || strings.Contains(rr.stderr, "baton run: releasing") {
			continue
		}
		if !released[s.token] {
			r.violate("release_missing_in_audit", "%s exited 0 with token %d, no release event in the audit log\n%s",
				rr.id, s.token, rr.stderr)
		}
	}
}

// holderPrefix + run ID is each baton run's --holder, to find its grant in the audit log.
const holderPrefix = "chaos/"

// auditWaits is how long each granted run waited: from its start to its grant in the audit log
// (the store's clock, on this machine).
func auditWaits(runs []runRecord, audit []auditEvent) map[string]time.Duration {
	grantAt := map[string]time.Time{}
	for _, e := range audit {
		if e.Kind == "acquire" || e.Kind == "expiry_takeover" {
			grantAt[strings.TrimPrefix(e.Holder, holderPrefix)] = e.At
		}
	}
	waits := map[string]time.Duration{}
	for _, rr := range runs {
		if at, ok := grantAt[rr.id]; ok {
			waits[rr.id] = at.Sub(rr.startWall)
		}
	}
	return waits
}

// resourceWaits is how long each run waited before its CMD's first call on the resource (the
// harness's clock), for a store without an audit log: the grant plus the CMD's start-up.
func resourceWaits(runs []runRecord, sp map[string]*runSpan) map[string]time.Duration {
	waits := map[string]time.Duration{}
	for _, rr := range runs {
		if s := sp[rr.id]; s != nil {
			waits[rr.id] = s.first - rr.start
		}
	}
	return waits
}

// faultFreeJudged is how many runs must have ended in the fault-free phase for check 4 to
// require a long wait among them: with clients that all start at once on one key, the second
// run to end waited for the first.
const faultFreeJudged = 3

// checkFaultFree is check 4: runs that ended before the first fault neither lost their lease
// (76) nor waited past --wait (75), nor failed otherwise; and some of them waited longer than
// the TTL (waits, by run ID), so that the scenario keeps exercising long waits.
//
// A lease lost because no renewal got through before the local deadline ("no renew ... succeeded
// in time") is what a holder or server starved of CPU sees: with a 2 s TTL a renewal has about a
// second, which a loaded machine can take from it. It fails soak runs (strict: a run of set
// duration, on a machine of its own) and is counted in the notes of the bounded run, which must
// pass on a loaded machine. A lease the server refused to renew (the holder renewed in time, the
// store had ended it) fails every run.
func checkFaultFree(runs []runRecord, waits map[string]time.Duration, faultFreeEnd time.Duration, strict bool, r *report, notes *counter) {
	longWaits, ended := 0, 0
	for _, rr := range runs {
		if rr.end >= faultFreeEnd {
			continue
		}
		ended++
		notes.add("faultfree_runs", 1)
		if w, ok := waits[rr.id]; ok && w > lockTTL {
			longWaits++
		}
		switch rr.code {
		case 0:
		case 76:
			if strings.Contains(rr.stderr, "no renew of the lease") && !strict {
				notes.add("faultfree_renewals_late", 1)
				continue
			}
			r.violate("faultfree_lease_lost", "%s exited 76 without any fault\n%s", rr.id, rr.stderr)
		case 75:
			r.violate("faultfree_wait_timeout", "%s exited 75 without any fault\n%s", rr.id, rr.stderr)
		default:
			r.violate("faultfree_error", "%s exited %d without any fault\n%s", rr.id, rr.code, rr.stderr)
		}
	}
	notes.add("faultfree_waits_over_ttl", longWaits)
	switch {
	case longWaits > 0:
	case ended < faultFreeJudged:
		// Too few runs ended before the first fault to judge (a loaded machine, CMDs of
		// seconds): the clients' first runs, one of which waited for none.
		notes.add("faultfree_long_waits_unjudged", 1)
	default:
		r.violate("faultfree_no_long_wait", "no run of the fault-free phase waited longer than the TTL (%s): the scenario no longer exercises long waits", lockTTL)
	}
}

// handoverStats summarises, over accepted enters and ok exits in recording order, how long CMDs
// held the resource and how long it stood idle between one CMD's exit and the next enter.
func handoverStats(events []event) string {
	var holds, gaps []time.Duration
	var lastExit, enter time.Duration = -1, -1
	for _, e := range events {
		switch {
		case e.Kind == "enter" && e.Accepted:
			if lastExit >= 0 {
				gaps = append(gaps, e.At-lastExit)
			}
			enter = e.At
		case e.Kind == "exit" && e.Accepted:
			if enter >= 0 {
				holds = append(holds, e.At-enter)
			}
			lastExit, enter = e.At, -1
		}
	}
	return fmt.Sprintf("hold p50 %s, handover gap p50 %s p99 %s", pct(holds, 50), pct(gaps, 50), pct(gaps, 99))
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = append([]time.Duration(nil), ds...)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[(len(ds)-1)*p/100].Round(time.Millisecond)
}
