// Package chaos is Baton's end-to-end fault harness: real `baton run` and `baton worker`
// processes against a real `baton serve` (SQLite, or a PostgreSQL instance the harness starts
// itself, or for locks a redis-server of its own), with faults injected one at a time (kill -9
// of clients and of the server, SIGSTOP of a client's process group, PostgreSQL and Redis
// restarts, a slow or cut network; in network namespaces of their own, links cut both ways or
// one way between clients, server and PostgreSQL, and holder and server clocks skewed through a
// chaosclock build: TestPartitionChaos, TestClockChaos), while the commands they
// run write to a fenced resource that records every event. The checks then look for overlapping
// critical sections, tokens out of order, grants or releases lost across restarts, leases lost
// without a fault, and lost or reordered jobs, and check the history of each locks and jobs
// run with porcupine against a model of the lease contract or of the job queue (checkHistory,
// checkQueueHistory); jobs submitted with policy replace, each resource's newest winning
// (TestReplaceChaos, checkReplace); beyond one key (TestBeyondChaos), for shared
// runs beside exclusive ones, runs of several keys, more runs of a limited group at once
// than its capacity, and runs on related keys of a tree that its matrix keeps apart; over three `baton serve` replicas on one PostgreSQL (TestReplicasChaos);
// and, for volume, 48 in-process clients cycling fenced leases through the HTTP client, every
// operation checked against the lease model (TestStormChaos; BATON_CHAOS_GRANTS=N runs it
// until N fenced grants). See "Fault runs (e2e/chaos)" in docs/guarantees.md.
//
// The bounded run (part of `make test`) is bounded by a condition, not by time: after a
// fault-free phase, faults come until every kind of fault has been injected once (about 30 s
// per store for locks and 20 s for jobs on an idle machine; longer on a loaded one, never with
// fewer faults). `make chaos DURATION=30m` runs each test for that long instead
// (BATON_CHAOS_DURATION or -chaos.duration).
package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

var (
	// binary is the baton binary built once for the package; fencedCmd is the CMD of every run
	// and job (internal/fencedcmd), the fenced resource's client.
	binary    string
	fencedCmd string

	durationFlag = flag.Duration("chaos.duration", 0,
		"how long each chaos test runs (default: env BATON_CHAOS_DURATION, else until every kind of fault was injected once)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "baton-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "baton")
	fencedCmd = filepath.Join(dir, "fencedcmd")
	// Without -race by default: 8 clients, their commands, the server and PostgreSQL share two
	// cores, and a race-enabled process is several times slower to start and to renew.
	args := []string{"build", "-o", binary}
	if os.Getenv("BATON_CHAOS_RACE") == "1" {
		args = append(args, "-race")
	}
	builds := [][]string{
		append(args, "github.com/batonhq/baton/cmd/baton"),
		{"build", "-o", fencedCmd, "github.com/batonhq/baton/e2e/chaos/internal/fencedcmd"},
	}
	if b := os.Getenv("BATON_CHAOS_BIN"); b != "" {
		// A baton binary built elsewhere (another worktree's fix, a release) instead of this
		// tree's.
		binary, builds = b, builds[1:]
	}
	for _, b := range builds {
		build := exec.Command("go", b...)
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: go %v: %v\n", b, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testDuration is how long one chaos test injects load (and faults after its fault-free
// phase), or 0 for the bounded run: faults until every kind was injected once.
func testDuration(t *testing.T) time.Duration {
	if *durationFlag > 0 {
		return *durationFlag
	}
	if v := os.Getenv("BATON_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("BATON_CHAOS_DURATION=%q: want a positive duration such as 30m", v)
		}
		return d
	}
	return 0
}

// faultFree is how long a test of duration dur (0: the bounded run) runs without faults: its
// first third, but at least min (for the locks test, enough for 8 clients on one key to queue
// for longer than the TTL). The phase is a schedule: what it checks is counted, not timed.
func faultFree(dur, least time.Duration) time.Duration {
	if dur == 0 {
		return least
	}
	return min(dur, max(dur/3, least))
}

// faultGuard bounds the bounded run's faults: only a fault that can never be injected (no
// client ever running to kill) keeps it going that long; the run then reports the kinds missed.
const faultGuard = 5 * time.Minute

// storeRuns bounds how many runs of one test over different stores (TestLocksChaos,
// TestJobsChaos, TestBeyondChaos, TestReplaceChaos: each run a server of its own, its clients or
// workers, and perhaps a PostgreSQL or redis-server of its own, on ports of its own) go at once:
// two, as for the partition runs (partitionRuns). Most of such a run's time is waiting on TTLs,
// CMDs and the schedule of faults, not CPU; the volume run (TestStormChaos), which is CPU, runs
// its stores one at a time.
var storeRuns = make(chan struct{}, 2)

// parallelStoreRun runs t beside its sibling runs over other stores, two at a time (storeRuns).
// The bounded runs' checks are bounded by conditions, not time, and pass on a loaded machine.
func parallelStoreRun(t *testing.T) {
	t.Parallel()
	storeRuns <- struct{}{}
	t.Cleanup(func() { <-storeRuns })
}

// describeDuration names a run's length for the summaries.
func describeDuration(dur time.Duration) string {
	if dur == 0 {
		return "bounded: every fault once"
	}
	return dur.String()
}
