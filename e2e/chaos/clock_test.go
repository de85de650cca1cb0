package chaos

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestClockChaos: clock faults in the partition topology (TestPartitionChaos's clients, server
// and checks), over SQLite, whose expiry clock is the server process's, and over PostgreSQL,
// whose clock is the database's. libfaketime cannot reach a Go program's clock (Go reads it
// through the vDSO, not libc, cgo or not), so the faults on baton's clocks use the test-only
// switches of a baton built with the chaosclock tag (holder_clock_chaos.go,
// store/sqlite/clock_chaos.go): BATON_CHAOS_CLOCK_RATE for the holders' clocks, and
// BATON_CHAOS_CLOCK_STEP with SIGUSR1 for the SQLite server's store clock. PostgreSQL's clock
// is stepped with libfaketime, which does reach it.
//
// The four runs go in parallel, two at a time (partitionRuns) with TestPartitionChaos's, 4
// clients each, each in namespaces of its own.
//
//   - holder_within_bound: every holder's clock runs 1% slow (rate 0.99, the default
//     DriftFactor's bound) while its client's link is cut, and the server's clock steps back
//     1 s; the checks must find nothing.
//   - holder_beyond_bound: every holder's clock runs at half speed while its link is cut for
//     longer than the TTL: the holder believes it holds after the server gave the key away.
//     The checks must see its late calls (overlap), and the fence must have refused every one.
//   - server_step_forward: the server's clock steps forward by 3 s (more than the TTL): every
//     lease expires at once on the store's clock while its holder still counts on it. Again
//     overlaps must show and every late call must have been refused.
//   - postgres_step_forward: the same over PostgreSQL, whose clock (now()) is the store's: it
//     runs under libfaketime (faketimeClock), which reaches a C program, and steps 3 s.
func TestClockChaos(t *testing.T) {
	t.Parallel()
	t.Run("holder_within_bound", func(t *testing.T) {
		t.Parallel()
		r, _ := runPartition(t, partitionSpec{bin: chaosClockBinary(t), clients: 4,
			clientEnv: []string{"BATON_CHAOS_CLOCK_RATE=0.99"}, serverEnv: []string{"BATON_CHAOS_CLOCK_STEP=-1s"},
			faults: func(p *partitionRig) []fault {
				return append(clientLinkFaults(p)[:2], serverStepFault(p, "server_clock_step_back", new(atomic.Int32)))
			}})
		r.finish(t)
	})
	t.Run("holder_beyond_bound", func(t *testing.T) {
		t.Parallel()
		r, events := runPartition(t, partitionSpec{bin: chaosClockBinary(t), span: "2s-5s", clients: 4,
			clientEnv: []string{"BATON_CHAOS_CLOCK_RATE=0.5"},
			faults: func(p *partitionRig) []fault {
				return []fault{untilOverlap(p, holderCutFault(p, 5*lockTTL/4, 2*lockTTL), 12)}
			}})
		expectOverlaps(t, r, events)
	})
	t.Run("server_step_forward", func(t *testing.T) {
		t.Parallel()
		r, events := runPartition(t, partitionSpec{bin: chaosClockBinary(t), span: "2s-5s", clients: 4,
			serverEnv: []string{"BATON_CHAOS_CLOCK_STEP=3s"},
			faults: func(p *partitionRig) []fault {
				return []fault{untilOverlap(p, serverStepFault(p, "server_clock_step_forward", new(atomic.Int32)), 12)}
			}})
		expectOverlaps(t, r, events)
	})
	t.Run("postgres_step_forward", func(t *testing.T) {
		t.Parallel()
		clock := newFaketimeClock(t)
		r, events := runPartition(t, partitionSpec{pg: true, pgEnv: clock.env(), span: "2s-5s", clients: 4,
			faults: func(p *partitionRig) []fault {
				return []fault{untilOverlap(p, clock.stepFault("postgres_clock_step_forward", 3*time.Second), 12)}
			}})
		expectOverlaps(t, r, events)
	})
}

// TestClockSwitchNotInProduction: the harness's baton, built without the chaosclock tag as
// every release is, carries neither clock switch.
func TestClockSwitchNotInProduction(t *testing.T) {
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"BATON_CHAOS_CLOCK_RATE", "BATON_CHAOS_CLOCK_STEP"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s carries %s: the chaosclock switch is in a build without its tag", binary, s)
		}
	}
}

var chaosClock struct {
	once sync.Once
	bin  string
	err  error
}

// chaosClockBinary builds this tree's baton with the chaosclock tag, once per package run.
func chaosClockBinary(t *testing.T) string {
	t.Helper()
	chaosClock.once.Do(func() {
		chaosClock.bin = filepath.Join(filepath.Dir(fencedCmd), "baton-chaosclock")
		out, err := exec.Command("go", "build", "-tags", "chaosclock", "-o", chaosClock.bin, "github.com/batonhq/baton/cmd/baton").CombinedOutput()
		if err != nil {
			chaosClock.err = fmt.Errorf("go build -tags chaosclock: %v\n%s", err, out)
		}
	})
	if chaosClock.err != nil {
		t.Fatal(chaosClock.err)
	}
	return chaosClock.bin
}

// serverStepFault steps the server's store clock by its BATON_CHAOS_CLOCK_STEP (SIGUSR1) and
// waits until the server has logged the step (steps counts the steps of every such fault of
// the run; faults come one at a time).
func serverStepFault(p *partitionRig, name string, steps *atomic.Int32) fault {
	return fault{name, func(*rand.Rand) bool {
		nth := int(steps.Add(1))
		srv := p.h.srv
		srv.mu.Lock()
		cmd := srv.cmd
		srv.mu.Unlock()
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			p.h.t.Errorf("%s: %v", name, err)
			return false
		}
		// A failure bound only: the server logs the step as soon as the signal arrives.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			out, _ := os.ReadFile(srv.log.Name())
			if strings.Count(string(out), "chaosclock: stepped") >= nth {
				return true
			}
			if time.Now().After(deadline) {
				p.h.t.Errorf("%s: the server did not log step %d within a minute", name, nth)
				return false
			}
		}
	}}
}

// holderCutFault cuts the link of the holder's namespace both ways for between lo and hi.
func holderCutFault(p *partitionRig, lo, hi time.Duration) fault {
	n := p.n
	return linkFault(p.h.t, "cut_client_link", lo, hi, func(rng *rand.Rand) (func() error, error) {
		dev := fmt.Sprintf("c%d", p.holderGroup(rng))
		return func() error { return n.setLink("srv", dev, true) }, n.setLink("srv", dev, false)
	})
}

// untilOverlap is f injected again and again, a TTL or two apart, until the resource has
// recorded a new overlap (a run's call after a newer token entered; what a fault beyond a
// bound is for) or most times: one fault of the run, however many injections it took.
func untilOverlap(p *partitionRig, f fault, most int) fault {
	overlaps := func() int {
		r := &report{}
		checkFencing(p.h.res.snapshot(), func(*runSpan) bool { return false }, &timeline{}, 0, r, &counter{})
		return r.violations.get("overlap/nofault")
	}
	return fault{f.name, func(rng *rand.Rand) bool {
		before := overlaps()
		for i := 1; i <= most; i++ {
			if !f.do(rng) {
				return false
			}
			time.Sleep(between(rng, lockTTL, 2*lockTTL)) // the schedule: let the lease change hands
			if seen := overlaps() > before; seen || i == most {
				p.h.t.Logf("%s: injected %d times (at most %d); a new overlap showed: %v", f.name, i, most, seen)
				return true
			}
		}
		return true
	}}
}

// expectOverlaps passes a run beyond a bound when the checks caught what the bound is for:
// some run went on after a newer token entered (overlap), perhaps a holder's CMD entered only
// after a newer token had (token_order: a grant that reached its holder late), the fence
// refused every such call (no accepted_late_write, no stale enter accepted), and nothing else
// was found.
func expectOverlaps(t *testing.T, r *report, events []event) {
	t.Helper()
	r.violations.mu.Lock()
	overlaps, others := 0, map[string]int{}
	for kind, n := range r.violations.m {
		switch {
		case strings.HasPrefix(kind, "overlap/"):
			overlaps += n
		case strings.HasPrefix(kind, "token_order/"):
		default:
			others[kind] = n
		}
	}
	r.violations.mu.Unlock()
	maxEnter := map[string]uint64{}
	for _, e := range events {
		if e.Kind != "enter" || !e.Accepted {
			continue
		}
		if e.Token < maxEnter[e.Key] {
			t.Errorf("the fence accepted %s's enter with token %d after token %d had entered", e.Run, e.Token, maxEnter[e.Key])
		}
		maxEnter[e.Key] = max(maxEnter[e.Key], e.Token)
	}
	t.Logf("beyond the bound: %d runs went on after a newer token entered, every late call refused by the fence; violations: %s",
		overlaps, r.violations.String())
	if overlaps == 0 {
		t.Error("beyond the bound, no overlap was caught: the checks (or the fault) no longer show what breaks")
	}
	if len(others) > 0 {
		r.finish(t) // the examples, and the failure
	}
}
