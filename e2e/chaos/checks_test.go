package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// report collects violations (which fail the test) and keeps a few examples of each kind.
type report struct {
	mu         sync.Mutex
	violations counter
	examples   map[string][]string
}

func (r *report) violate(kind, format string, args ...any) {
	r.violations.add(kind, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.examples == nil {
		r.examples = map[string][]string{}
	}
	if len(r.examples[kind]) < 5 {
		r.examples[kind] = append(r.examples[kind], fmt.Sprintf(format, args...))
	}
}

// finish logs the examples and fails the test if there was any violation.
func (r *report) finish(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	kinds := make([]string, 0, len(r.examples))
	for k := range r.examples {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		for _, ex := range r.examples[k] {
			fmt.Fprintf(&b, "  %s: %s\n", k, ex)
		}
	}
	r.mu.Unlock()
	if b.Len() > 0 {
		t.Errorf("violations: %s\nexamples:\n%s", r.violations.String(), b.String())
	}
}

// runSpan is one CMD execution as the resource saw it.
type runSpan struct {
	run, client, key string
	token            uint64
	job              int64
	first, last      time.Duration
	entered          bool // an enter was accepted
	enterAt          time.Duration
	okExitAt         time.Duration // the exit of a CMD that completed its work (status ok), or -1
}

func spans(events []event) map[string]*runSpan {
	m := map[string]*runSpan{}
	for _, e := range events {
		s := m[e.Run]
		if s == nil {
			s = &runSpan{run: e.Run, client: e.Client, key: e.Key, token: e.Token, job: e.Job, first: e.At, okExitAt: -1}
			m[e.Run] = s
		}
		s.last = e.At
		if e.Kind == "enter" && e.Accepted {
			s.entered, s.enterAt = true, e.At
		}
		if e.Kind == "exit" && e.Status == "ok" && e.Accepted {
			s.okExitAt = e.At
		}
	}
	return m
}

// checkFencing runs checks 1 and 2 over the resource's events, in the order it recorded them:
//
//  1. no overlap: a write or exit of token A recorded after an accepted enter of token B > A
//     means CMD A was still running when B started. That is allowed only if A's client was
//     SIGSTOPped during its run (stalled: only fencing can help), and then every such late
//     call must have been refused.
//  2. tokens increase in grant order: an enter whose token is not above every token that
//     entered before, or a token used by two runs, is a violation (unless, for the former, the
//     run's client was stopped: a stalled holder that resumes with its old token is refused).
//
// stalled(span) says whether the span's client was stopped during it.
//
// Violations are named with the faults in force shortly before (tl.during), e.g.
// overlap/nofault or overlap/net_cut.
func checkFencing(events []event, stalled func(*runSpan) bool, tl *timeline, window time.Duration, r *report, notes *counter) {
	sp := spans(events)
	maxEnter := map[string]uint64{}
	tokenRun := map[string]map[uint64]string{}
	lateRun := map[string]bool{}
	for _, e := range events {
		s := sp[e.Run]
		switch e.Kind {
		case "enter":
			if tokenRun[e.Key] == nil {
				tokenRun[e.Key] = map[uint64]string{}
			}
			if other, ok := tokenRun[e.Key][e.Token]; ok && other != e.Run {
				r.violate("token_reuse", "key %s: token %d entered by %s and by %s", e.Key, e.Token, other, e.Run)
			}
			tokenRun[e.Key][e.Token] = e.Run
			if e.Token <= maxEnter[e.Key] && tokenRun[e.Key][maxEnter[e.Key]] != e.Run {
				if stalled(s) && !e.Accepted {
					notes.add("fenced_stale_enter", 1)
				} else {
					r.violate("token_order/"+tl.during(e.At, window), "key %s: %s entered with token %d at %s after token %d had entered (accepted=%v)",
						e.Key, e.Run, e.Token, e.At, maxEnter[e.Key], e.Accepted)
				}
			}
			if e.Accepted && e.Token > maxEnter[e.Key] {
				maxEnter[e.Key] = e.Token
			}
		case "write", "exit":
			if e.Token >= maxEnter[e.Key] || lateRun[e.Run] {
				continue
			}
			lateRun[e.Run] = true
			switch {
			case e.Accepted:
				r.violate("accepted_late_write", "key %s: %s (token %d) %s accepted at %s after token %d entered",
					e.Key, e.Run, e.Token, e.Kind, e.At, maxEnter[e.Key])
			case stalled(s):
				notes.add("fenced_late_write_of_stalled_run", 1)
			default:
				r.violate("overlap/"+tl.during(e.At, window), "key %s: %s (token %d, client not stopped) still ran (%s %s at %s) after token %d entered",
					e.Key, e.Run, e.Token, e.Kind, e.Status, e.At, maxEnter[e.Key])
			}
		}
	}
}

// exitClass names a `baton run` exit code for the summary.
func exitClass(code int) string {
	switch code {
	case 0:
		return "0_ok"
	case 75:
		return "75_busy"
	case 76:
		return "76_lease_lost"
	case exitFenced:
		return "42_cmd_fenced"
	case 1:
		return "1_error"
	case 137:
		return "137_killed"
	case 143:
		return "143_cmd_terminated"
	default:
		return fmt.Sprintf("%d_other", code)
	}
}

// checkOrphans runs once every baton run or worker has exited: no CMD may still be alive (on
// Linux, CMD dies with its wrapper, even when the wrapper is killed with SIGKILL). A survivor is
// killed and reported.
func checkOrphans(events []event, r *report) {
	seen := map[int]bool{}
	for _, e := range events {
		if seen[e.PID] || e.PID <= 0 {
			continue
		}
		seen[e.PID] = true
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(e.PID), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "fencedcmd" {
			continue
		}
		if st, ok := procStat(e.PID); !ok || st.state == "Z" || st.state == "X" {
			continue // dead, not yet reaped by its new parent
		}
		_ = syscall.Kill(e.PID, syscall.SIGKILL)
		r.violate("orphan_cmd", "CMD %s (pid %d, token %d) still ran after every wrapper had exited", e.Run, e.PID, e.Token)
	}
}
