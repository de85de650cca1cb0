package chaos

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// beyondGroup is the limit the group's clients take, of capacity beyondGroupN.
	beyondGroup  = "chaos/group"
	beyondGroupN = 2
	// beyondTree is the tree prefix of the tree's clients and jobs (baton resources set-tree).
	beyondTree = "chaos/tree/"
	// beyondStuck bounds the wait, once the faults have ended, for every client to complete a
	// run: a client that cannot (a deadlock, a lost grant) fails the test as stuck.
	beyondStuck = 3 * time.Minute
)

// beyondClients are the runs of TestBeyondChaos, by client: baton run's holds.
var beyondClients = []struct {
	name  string
	holds []string
}{
	// Shared and exclusive runs on one key.
	{"s0", []string{"--lock", "chaos/sx", "--shared"}},
	{"s1", []string{"--lock", "chaos/sx", "--shared"}},
	{"x0", []string{"--lock", "chaos/sx"}},
	{"x1", []string{"--lock", "chaos/sx"}},
	// Several keys each, overlapping, named in varying order.
	{"m0", []string{"--lock", "chaos/a", "--lock", "chaos/b"}},
	{"m1", []string{"--lock", "chaos/b", "--lock", "chaos/c"}},
	{"m2", []string{"--lock", "chaos/c", "--lock", "chaos/a"}},
	// A limited group: distinct keys, one limit of 2.
	{"g0", []string{"--lock", "chaos/g0", "--limit", beyondGroup}},
	{"g1", []string{"--lock", "chaos/g1", "--limit", beyondGroup}},
	{"g2", []string{"--lock", "chaos/g2", "--limit", beyondGroup}},
	// A tree (beyondTree): its root shared, a parent and two children in both modes.
	{"tr_s", []string{"--lock", "chaos/tree", "--shared"}},
	{"tp_x", []string{"--lock", "chaos/tree/p"}},
	{"tp_s", []string{"--lock", "chaos/tree/p", "--shared"}},
	{"tc1_x", []string{"--lock", "chaos/tree/p/c1"}},
	{"tc1_s", []string{"--lock", "chaos/tree/p/c1", "--shared"}},
	{"tc2_x", []string{"--lock", "chaos/tree/p/c2"}},
}

// TestBeyondChaos: clients loop `baton run` beyond one exclusive key, with the faults of the
// locks test (kill -9 and SIGSTOP of clients, kill -9 of the server, a PostgreSQL restart, a
// slow or cut network), after a fault-free phase: shared and exclusive runs on one key, runs of
// two keys each over three overlapping keys, runs on distinct keys that each take a unit of
// one limit of 2, and runs on the keys of a tree (its root, a parent, two children). Their CMD
// calls the fenced resource for every key it holds and for its limit slot
// (fence.LimitSlotKey), in its mode; the resource fences a tree key on its ancestors too
// (treeFence). Checked at the resource: no exclusive run beside any other run of its key,
// shared runs beside shared runs only, tokens against the two marks (checkModes); never more
// than 2 runs of the group inside at once (checkGroup); no two runs on related keys of the tree
// together unless both are shared, by the same marks over related keys (checkTree); and, once
// the faults have ended, every client completes a run again (no deadlock, no lost grant). Jobs
// of the same shapes run beside them (beyondJobSpecs), under kill -9 and SIGSTOP of their
// worker too, and must all end succeeded.
func TestBeyondChaos(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		parallelStoreRun(t)
		runBeyond(t, "sqlite://"+filepath.Join(t.TempDir(), "baton.db"), nil)
	})
	t.Run("postgres", func(t *testing.T) {
		parallelStoreRun(t)
		pg := startPostgres(t)
		runBeyond(t, pg.url(), pg)
	})
}

func runBeyond(t *testing.T, store string, pg *postgres) {
	dur := testDuration(t)
	base := time.Now()
	h := &lockHarness{t: t, res: newResource(t, base), pg: pg, dir: t.TempDir(), done: make(chan struct{})}
	h.srv = startServer(t, store)
	h.srv.batonCLI("limits", "set", beyondGroup, fmt.Sprint(beyondGroupN))
	h.srv.batonCLI("resources", "set-tree", beyondTree)
	h.res.setTree(beyondTree)
	h.px = startProxy(t, h.srv.addr)
	faultFreeEnd := h.res.now() + faultFree(dur, 5*time.Second)
	var stopAt time.Duration // 0: the bounded run
	if dur > 0 {
		stopAt = h.res.now() + dur
	}

	// Once the faults have ended, each client runs until one of its runs started after the end
	// and completed (exit 0).
	var okMu sync.Mutex
	okAfter := map[string]bool{}
	var faultsEnd time.Duration
	more := func(c *lockClient) bool {
		okMu.Lock()
		defer okMu.Unlock()
		if okAfter[c.name] {
			return false
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for i := len(h.runs) - 1; i >= 0 && h.runs[i].start >= faultsEnd; i-- {
			if h.runs[i].client == c.name && h.runs[i].code == 0 {
				okAfter[c.name] = true
				return false
			}
		}
		return true
	}

	clients := make([]*lockClient, len(beyondClients))
	var wg sync.WaitGroup
	for i, bc := range beyondClients {
		c := &lockClient{name: bc.name}
		clients[i] = c
		wg.Go(func() { h.loopRuns(c, bc.holds, more) })
	}
	jobs := startBeyondJobs(h)
	faults, tl := &counter{}, &timeline{}
	faultKinds := append(h.lockFaults(clients), jobs.faults()...)
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		time.Sleep(faultFreeEnd - h.res.now()) // the fault-free phase is a schedule
		injectFaults(h.res, stopAt, &h.quit, faultKinds, faults, tl, uint64(base.UnixNano()))
		okMu.Lock()
		faultsEnd = h.res.now()
		okMu.Unlock()
		close(h.done)
	}()
	killAll := func() { killRuns(clients) }
	t.Cleanup(func() { // after a fatal error, nothing may outlive the test
		h.quit.Store(true)
		killAll()
		jobs.kill()
		wg.Wait()
		<-faultsDone
	})
	// Submit a round of jobs about every 1.5 s until the faults have ended.
submitting:
	for round := 0; ; round++ {
		select {
		case <-faultsDone:
			break submitting
		default:
		}
		jobs.submitRound(round)
		time.Sleep(1500 * time.Millisecond) // the submission rate
	}
	r := &report{}
	// Each client needs one run to complete; the clients still going past the bound are
	// reported as stuck below.
	waitLoops(&wg, beyondStuck, func() { h.quit.Store(true); killAll() })
	jobCounts := jobs.drain(r)
	for _, c := range clients {
		okMu.Lock()
		ok := okAfter[c.name]
		okMu.Unlock()
		if !ok {
			runs, last := 0, runRecord{code: -1}
			h.mu.Lock()
			for _, rr := range h.runs {
				if rr.client == c.name && rr.start >= faultsEnd {
					runs, last = runs+1, rr
				}
			}
			h.mu.Unlock()
			r.violate("stuck", "client %s completed no run within %s of the end of the faults (%d runs since, the last exited %d)\n%s",
				c.name, beyondStuck, runs, last.code, last.stderr)
		}
	}

	notes := &counter{}
	events := h.res.snapshot()
	byRun := map[string]runRecord{}
	for _, rr := range h.runs {
		byRun[rr.id] = rr
	}
	stalled := func(s *runSpan) bool {
		rr, ok := byRun[s.run]
		if !ok { // a job's CMD: a worker stopped between its claim and CMD's start stalls it too
			return jobs.jh.stops.stopped(s.client, s.first-2*jobLeaseTTL, s.last)
		}
		return h.stops.stopped(rr.client, rr.start, rr.end)
	}
	var flat []event // the tree's keys are judged by checkTree
	for _, e := range events {
		if !treeKeys(beyondTree).has(e.Key) {
			flat = append(flat, e)
		}
	}
	checkModes(flat, stalled, tl, 2*lockTTL, r, notes)
	checkTree(events, beyondTree, stalled, tl, 2*lockTTL, r, notes)
	checkGroup(events, beyondGroup, beyondGroupN, r, notes)
	checkOrphans(events, r)
	for _, rr := range h.runs {
		if rr.end >= faultFreeEnd {
			continue
		}
		switch {
		case rr.code == 0 || rr.code == 75:
		case rr.code == 76 && strings.Contains(rr.stderr, "no renew of the lease") && dur == 0:
			notes.add("faultfree_renewals_late", 1) // a starved holder, as in checkFaultFree
		default:
			r.violate("faultfree_error", "%s exited %d without any fault\n%s", rr.id, rr.code, rr.stderr)
		}
	}
	if dur == 0 {
		checkEveryFault(faultKinds, faults, r)
	}

	okRuns, exits := &counter{}, &counter{}
	for _, rr := range h.runs {
		exits.add(exitClass(rr.code), 1)
		if rr.code == 0 {
			okRuns.add(rr.client, 1)
		}
	}
	var keys []string
	perKey := map[string]int{}
	for _, e := range events {
		if e.Kind == "enter" && e.Accepted {
			if perKey[e.Key] == 0 {
				keys = append(keys, e.Key)
			}
			perKey[e.Key]++
		}
	}
	sort.Strings(keys)
	var entered strings.Builder
	for i, k := range keys {
		if i > 0 {
			entered.WriteString(", ")
		}
		fmt.Fprintf(&entered, "%s=%d", k, perKey[k])
	}
	t.Logf("chaos beyond summary (%s, %s, %d clients, TTL %s, limit %s of %d, tree %s, fault-free until %s):\n"+
		"  runs: %d; completed per client: %s\n  jobs (shared, two keys, limited, tree parent and child; 1 worker): %s\n  accepted enters per key: %s\n  exit codes: %s\n  faults: %s\n  notes: %s\n  violations: %s",
		storeName(store), describeDuration(dur), len(clients), lockTTL, beyondGroup, beyondGroupN, beyondTree, faultFreeEnd.Round(time.Second),
		len(h.runs), okRuns, jobCounts, entered.String(), exits, faults, notes, r.violations.String())
	r.finish(t)
}
