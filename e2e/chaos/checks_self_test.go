package chaos

import (
	"slices"
	"testing"
	"time"
)

// The checks themselves, on made-up event logs: each kind of violation is caught, and what the
// contract allows (a stalled holder fenced out) is not reported.
func TestChecksCatchViolations(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ev := func(at int, kind, run string, token uint64, accepted bool, status string) event {
		return event{At: ms(at), Kind: kind, Key: "k", Client: "c-" + run, Run: run, Token: token, Accepted: accepted, Status: status}
	}
	cases := []struct {
		name    string
		events  []event
		stalled string // the run whose client was stopped
		want    string // violation kind, "" for none
	}{
		{"clean handover", []event{
			ev(0, "enter", "a", 1, true, ""), ev(10, "write", "a", 1, true, ""), ev(20, "exit", "a", 1, true, "ok"),
			ev(30, "enter", "b", 2, true, ""), ev(40, "exit", "b", 2, true, "ok"),
		}, "", ""},
		{"late refused write, client not stopped", []event{
			ev(0, "enter", "a", 1, true, ""), ev(30, "enter", "b", 2, true, ""),
			ev(40, "write", "a", 1, false, "cleanup"), ev(50, "exit", "b", 2, true, "ok"),
		}, "", "overlap/nofault"},
		{"late exit, client not stopped", []event{
			ev(0, "enter", "a", 1, true, ""), ev(30, "enter", "b", 2, true, ""), ev(40, "exit", "a", 1, false, "term"),
		}, "", "overlap/nofault"},
		{"late refused write of a stalled client", []event{
			ev(0, "enter", "a", 1, true, ""), ev(30, "enter", "b", 2, true, ""), ev(40, "write", "a", 1, false, ""),
		}, "a", ""},
		{"late accepted write of a stalled client", []event{
			ev(0, "enter", "a", 1, true, ""), ev(30, "enter", "b", 2, true, ""), ev(40, "write", "a", 1, true, ""),
		}, "a", "accepted_late_write"},
		{"token going backwards", []event{
			ev(0, "enter", "a", 5, true, ""), ev(20, "exit", "a", 5, true, "ok"), ev(30, "enter", "b", 4, false, ""),
		}, "", "token_order/nofault"},
		{"stale enter of a stalled client", []event{
			ev(0, "enter", "a", 5, true, ""), ev(20, "exit", "a", 5, true, "ok"), ev(30, "enter", "b", 4, false, ""),
		}, "b", ""},
		{"token reused", []event{
			ev(0, "enter", "a", 5, true, ""), ev(20, "exit", "a", 5, true, "ok"), ev(30, "enter", "b", 5, true, ""),
		}, "", "token_reuse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.events {
				c.events[i].Seq = i
			}
			r, notes := &report{}, &counter{}
			checkFencing(c.events, func(s *runSpan) bool { return s.run == c.stalled }, &timeline{}, time.Second, r, notes)
			got := r.violations.String()
			if c.want == "" && got != "none" {
				t.Errorf("violations %s, want none", got)
			}
			if c.want != "" && r.violations.get(c.want) == 0 {
				t.Errorf("violations %s, want %s", got, c.want)
			}
		})
	}
}

func TestJobOrderCheck(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	run := func(job int64, enter, okExit int) *runSpan {
		return &runSpan{job: job, entered: true, enterAt: ms(enter), okExitAt: ms(okExit)}
	}
	cases := []struct {
		name string
		runs []*runSpan
		bad  bool
	}{
		{"in order", []*runSpan{run(1, 0, 10), run(2, 20, 30)}, false},
		{"in order after a failed attempt", []*runSpan{run(1, 0, -1), run(1, 15, 18), run(2, 20, 30)}, false},
		{"second before the first succeeded", []*runSpan{run(1, 0, 25), run(2, 20, 30)}, true},
		{"second before the first ran", []*runSpan{run(2, 5, 8), run(1, 10, 12)}, true},
		{"first retried after the second started", []*runSpan{run(1, 0, 10), run(2, 20, 30), run(1, 40, -1)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp := map[string]*runSpan{}
			for i, s := range c.runs {
				sp[string(rune('a'+i))] = s
			}
			r := &report{}
			checkJobOrder(map[string][]int64{"res": {1, 2}}, sp, r)
			if got := r.violations.get("job_order") > 0; got != c.bad {
				t.Errorf("job_order violation = %v, want %v (%s)", got, c.bad, r.violations.String())
			}
		})
	}
}

// The line order check, on made-up audit logs: grants in ticket order pass; a later ticket
// granted first is caught; runs granted without a ticket, or after the fault-free phase, are not
// compared.
func TestLineOrderCheck(t *testing.T) {
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	ev := func(id int64, ms int, kind, run string) auditEvent {
		return auditEvent{ID: id, At: base.Add(time.Duration(ms) * time.Millisecond), Kind: kind, Holder: holderPrefix + run}
	}
	runs := []runRecord{{id: "a", end: time.Second}, {id: "b", end: time.Second}, {id: "c", end: time.Second},
		{id: "late", end: time.Hour}}
	inOrder := []auditEvent{ev(1, 0, "acquire", "c"), ev(2, 1, "ticket_enqueue", "a"), ev(3, 2, "ticket_enqueue", "b"),
		ev(4, 3, "acquire", "a"), ev(5, 4, "ticket_enqueue", "late"), ev(6, 5, "acquire", "late"), ev(7, 6, "acquire", "b")}
	swapped := []auditEvent{ev(2, 1, "ticket_enqueue", "a"), ev(3, 2, "ticket_enqueue", "b"),
		ev(4, 3, "acquire", "b"), ev(7, 6, "acquire", "a")}
	// Two tickets of one millisecond: the store's order within it is not in the log.
	sameMS := []auditEvent{ev(2, 1, "ticket_enqueue", "a"), ev(3, 1, "ticket_enqueue", "b"),
		ev(4, 3, "acquire", "b"), ev(7, 6, "acquire", "a")}
	for name, c := range map[string]struct {
		audit []auditEvent
		want  int
	}{"in order": {inOrder, 0}, "swapped": {swapped, 1}, "same millisecond": {sameMS, 0}} {
		r, notes := &report{}, &counter{}
		checkLineOrder(lineCheck{audit: c.audit, runs: runs, faultFreeEnd: time.Minute}, r, notes)
		if got := r.violations.get("line_order"); got != c.want {
			t.Errorf("%s: %d line_order violations, want %d (notes %s)", name, got, c.want, notes)
		}
	}
}

// The line order check on made-up audit logs of the jobs test: lock runs and jobs on two keys,
// job claims among the ticket events. Grants are compared per key; with the jobs, the cross rule
// catches a later job claimed while a ticket waited, and a lock granted before an earlier job
// that had no head backing off before it; fewer than 2 compared grants, or no job meeting a
// waiting ticket, fail as unchecked.
func TestLineOrderCheckMixed(t *testing.T) {
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(id int64, ms int, kind, key, run string) auditEvent {
		return auditEvent{ID: id, At: at(ms), Kind: kind, Key: key, Holder: holderPrefix + run}
	}
	claim := func(id int64, ms int, key string, job int64) auditEvent {
		return auditEvent{ID: id, At: at(ms), Kind: "job_claim", Key: key, Holder: "w0", JobID: job, Attempt: 1}
	}
	runs := []runRecord{{id: "l0-0", end: time.Second}, {id: "l1-0", end: time.Second}, {id: "l2-0", end: time.Second},
		{id: "l0-1", end: time.Second}}
	job := func(id int64, key string, created, acked int, clean bool) lineJob {
		return lineJob{id: id, key: key, createdAt: at(created), acked: at(acked), clean: clean}
	}
	jobs := func(js ...lineJob) map[int64]lineJob {
		m := map[int64]lineJob{}
		for _, j := range js {
			m[j.id] = j
		}
		return m
	}
	// On r0: job 1 (before every ticket), l0-0, l1-0 and l2-0 wait together, job 2 is submitted
	// while they wait and claimed after them. On r1, in between: l0-1 waits and is granted; its
	// ticket is later than r0's first ones, and it is granted first: another key, no violation.
	inOrder := []auditEvent{ev(1, 1, "ticket_enqueue", "r0", "l0-0"), claim(2, 2, "r0", 1),
		ev(3, 3, "ticket_enqueue", "r0", "l1-0"), ev(4, 4, "ticket_enqueue", "r1", "l0-1"), ev(5, 4, "ticket_enqueue", "r0", "l2-0"),
		ev(6, 5, "acquire", "r1", "l0-1"), ev(7, 6, "acquire", "r0", "l0-0"),
		ev(8, 7, "acquire", "r0", "l1-0"), ev(9, 9, "acquire", "r0", "l2-0"), claim(10, 10, "r0", 2)}
	inOrderJobs := jobs(job(1, "r0", 0, 0, true), job(2, "r0", 5, 5, true))
	cases := []struct {
		name  string
		audit []auditEvent
		jobs  map[int64]lineJob
		want  map[string]int // violations by kind; kinds not named: none
	}{
		{"in order", inOrder, inOrderJobs, nil},
		{"in order, without the jobs", inOrder, nil, nil},
		{"tickets swapped among job claims", []auditEvent{ev(1, 1, "ticket_enqueue", "r0", "l0-0"), claim(2, 2, "r0", 1),
			ev(3, 3, "ticket_enqueue", "r0", "l1-0"), ev(4, 4, "ticket_enqueue", "r0", "l2-0"),
			ev(5, 6, "acquire", "r0", "l1-0"), ev(6, 7, "acquire", "r0", "l0-0"), ev(7, 9, "acquire", "r0", "l2-0")},
			inOrderJobs, map[string]int{"line_order": 1}},
		{"a later job claimed while a ticket waited", append(slices.Clone(inOrder[:6]), claim(7, 6, "r0", 2),
			ev(8, 7, "acquire", "r0", "l0-0"), ev(9, 8, "acquire", "r0", "l1-0"), ev(10, 9, "acquire", "r0", "l2-0")),
			inOrderJobs, map[string]int{"line_order_cross": 3}},
		{"a lock granted before an earlier job", append(slices.Clone(inOrder[:1]), ev(3, 3, "ticket_enqueue", "r0", "l1-0"),
			ev(4, 4, "ticket_enqueue", "r0", "l2-0"), ev(5, 6, "acquire", "r0", "l0-0"), claim(6, 6, "r0", 1),
			ev(7, 7, "acquire", "r0", "l1-0"), ev(8, 9, "acquire", "r0", "l2-0")),
			inOrderJobs, map[string]int{"line_order_cross": 1}},
		{"a lock granted before an earlier job behind a head that backed off", append(slices.Clone(inOrder[:1]),
			ev(3, 3, "ticket_enqueue", "r0", "l1-0"), ev(4, 4, "ticket_enqueue", "r0", "l2-0"), ev(5, 6, "acquire", "r0", "l0-0"),
			claim(6, 6, "r0", 1), ev(7, 7, "acquire", "r0", "l1-0"), ev(8, 9, "acquire", "r0", "l2-0")),
			jobs(job(1, "r0", 0, 0, false), job(2, "r0", 5, 5, true)), nil},
		{"one grant compared", inOrder[:8], inOrderJobs, map[string]int{"line_order_unchecked": 1}},
		{"tickets of two keys are not compared", []auditEvent{ev(1, 1, "ticket_enqueue", "r0", "l0-0"),
			ev(2, 2, "ticket_enqueue", "r1", "l1-0"), ev(3, 3, "acquire", "r1", "l1-0"), ev(4, 4, "acquire", "r0", "l0-0")},
			nil, map[string]int{"line_order_unchecked": 1}},
		{"no job while a ticket waited", inOrder, jobs(job(3, "r0", 0, 0, true)), map[string]int{"line_order_cross_unchecked": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, notes := &report{}, &counter{}
			checkLineOrder(lineCheck{audit: c.audit, runs: runs, faultFreeEnd: time.Minute, jobs: c.jobs}, r, notes)
			for _, kind := range []string{"line_order", "line_order_cross", "line_order_unchecked", "line_order_cross_unchecked"} {
				if got := r.violations.get(kind); got != c.want[kind] {
					t.Errorf("%d %s violations, want %d (violations %s, notes %s)", got, kind, c.want[kind], r.violations.String(), notes)
				}
			}
			if c.name == "in order" {
				if got := notes.get("line_grants_compared"); got != 2 {
					t.Errorf("line_grants_compared = %d, want 2 (notes %s)", got, notes)
				}
				// l0-0: job 1 claimed and job 2 submitted while it waited; l1-0 and l2-0: job 2.
				if got := notes.get("line_cross_compared"); got != 4 {
					t.Errorf("line_cross_compared = %d, want 4 (notes %s)", got, notes)
				}
			}
		})
	}
}

// The mode check, on made-up event logs: shared runs beside each other and a stalled holder
// fenced out pass; a run still inside beside a conflicting later one, a late call accepted, an
// enter below a mark, and a refused enter of a run that was not stopped are caught, per key.
func TestModeChecksCatchViolations(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ev := func(at int, kind, key, run string, token uint64, shared, accepted bool, status string) event {
		mode := ""
		if shared {
			mode = "shared"
		}
		return event{At: ms(at), Kind: kind, Key: key, Mode: mode, Client: "c-" + run, Run: run, Token: token, Accepted: accepted, Status: status}
	}
	const sh, ex = true, false
	cases := []struct {
		name    string
		events  []event
		stalled string
		want    string
	}{
		{"shared beside shared, tokens interleaved", []event{
			ev(0, "enter", "k", "a", 5, sh, true, ""), ev(10, "enter", "k", "b", 4, sh, true, ""),
			ev(20, "write", "k", "a", 5, sh, true, ""), ev(30, "exit", "k", "b", 4, sh, true, "ok"), ev(40, "exit", "k", "a", 5, sh, true, "ok"),
			ev(50, "enter", "k", "c", 6, ex, true, ""), ev(60, "exit", "k", "c", 6, ex, true, "ok"),
		}, "", ""},
		{"exclusive beside a shared run that goes on", []event{
			ev(0, "enter", "k", "a", 5, sh, true, ""), ev(10, "enter", "k", "b", 6, ex, true, ""),
			ev(20, "write", "k", "a", 5, sh, false, ""),
		}, "", "overlap/nofault"},
		{"exclusive beside a stalled shared run, fenced out", []event{
			ev(0, "enter", "k", "a", 5, sh, true, ""), ev(10, "enter", "k", "b", 6, ex, true, ""),
			ev(20, "write", "k", "a", 5, sh, false, ""),
		}, "a", ""},
		{"late shared write accepted", []event{
			ev(0, "enter", "k", "a", 5, sh, true, ""), ev(10, "enter", "k", "b", 6, ex, true, ""),
			ev(20, "write", "k", "a", 5, sh, true, ""),
		}, "a", "accepted_late_write"},
		{"shared beside an exclusive run that goes on", []event{
			ev(0, "enter", "k", "a", 5, ex, true, ""), ev(10, "enter", "k", "b", 6, sh, true, ""),
			ev(20, "exit", "k", "a", 5, ex, false, "term"),
		}, "", "overlap/nofault"},
		{"shared entered below an exclusive token", []event{
			ev(0, "enter", "k", "a", 6, ex, true, ""), ev(10, "exit", "k", "a", 6, ex, true, "ok"),
			ev(20, "enter", "k", "b", 5, sh, true, ""),
		}, "", "accepted_below_mark"},
		{"exclusive entered below a shared token", []event{
			ev(0, "enter", "k", "a", 6, sh, true, ""), ev(10, "exit", "k", "a", 6, sh, true, "ok"),
			ev(20, "enter", "k", "b", 5, ex, true, ""),
		}, "", "accepted_below_mark"},
		{"refused enter of a run not stopped", []event{
			ev(0, "enter", "k", "a", 6, ex, true, ""), ev(10, "exit", "k", "a", 6, ex, true, "ok"),
			ev(20, "enter", "k", "b", 5, sh, false, ""),
		}, "", "token_order/nofault"},
		{"token of two runs", []event{
			ev(0, "enter", "k", "a", 6, sh, true, ""), ev(10, "enter", "k", "b", 6, sh, true, ""),
		}, "", "token_reuse"},
		{"several keys: overlap on the second key only", []event{
			ev(0, "enter", "k1", "a", 5, ex, true, ""), ev(1, "enter", "k2", "a", 5, ex, true, ""),
			ev(10, "enter", "k2", "b", 6, ex, true, ""), ev(11, "enter", "k3", "b", 6, ex, true, ""),
			ev(20, "write", "k1", "a", 5, ex, true, ""), ev(21, "write", "k2", "a", 5, ex, false, ""),
		}, "", "overlap/nofault"},
		{"several keys, one after another", []event{
			ev(0, "enter", "k1", "a", 5, ex, true, ""), ev(1, "enter", "k2", "a", 5, ex, true, ""),
			ev(20, "exit", "k1", "a", 5, ex, true, "ok"), ev(21, "exit", "k2", "a", 5, ex, true, "ok"),
			ev(30, "enter", "k2", "b", 6, ex, true, ""), ev(31, "enter", "k1", "b", 6, ex, true, ""),
		}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.events {
				c.events[i].Seq = i
			}
			r, notes := &report{}, &counter{}
			checkModes(c.events, func(s *runSpan) bool { return s.run == c.stalled }, &timeline{}, time.Second, r, notes)
			got := r.violations.String()
			if c.want == "" && got != "none" {
				t.Errorf("violations %s, want none", got)
			}
			if c.want != "" && r.violations.get(c.want) == 0 {
				t.Errorf("violations %s, want %s", got, c.want)
			}
		})
	}
}

// The group check: two runs of a limit of 2 inside at once pass; three are caught, as is a slot
// outside the limit, and a run that never filled the limit fails as unchecked.
func TestGroupCheck(t *testing.T) {
	ev := func(kind, key, run string, accepted bool) event {
		return event{Kind: kind, Key: key, Run: run, Accepted: accepted}
	}
	cases := []struct {
		name   string
		events []event
		want   string
	}{
		{"two at once, then a third in a freed slot", []event{
			ev("enter", "g#0", "a", true), ev("enter", "g#1", "b", true), ev("exit", "g#0", "a", true),
			ev("enter", "g#0", "c", true), ev("exit", "g#1", "b", true), ev("exit", "g#0", "c", true),
		}, ""},
		{"a stalled holder's refused call does not count", []event{
			ev("enter", "g#0", "a", true), ev("enter", "g#1", "b", true), ev("enter", "g#0", "c", true),
			ev("write", "g#0", "a", false), ev("exit", "g#1", "b", true), ev("exit", "g#0", "c", true),
		}, ""},
		{"three at once", []event{
			ev("enter", "g#0", "a", true), ev("enter", "g#1", "b", true), ev("enter", "g#0", "c", true),
			ev("exit", "g#0", "a", true), ev("exit", "g#1", "b", true), ev("exit", "g#0", "c", true),
		}, "group_over_limit"},
		{"a slot beyond the capacity", []event{
			ev("enter", "g#0", "a", true), ev("enter", "g#2", "b", true), ev("exit", "g#0", "a", true), ev("exit", "g#2", "b", true),
		}, "group_slot_out_of_range"},
		{"never two at once", []event{
			ev("enter", "g#0", "a", true), ev("exit", "g#0", "a", true), ev("enter", "g#1", "b", true), ev("exit", "g#1", "b", true),
		}, "group_unchecked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.events {
				c.events[i].Seq = i
			}
			r, notes := &report{}, &counter{}
			checkGroup(c.events, "g", 2, r, notes)
			got := r.violations.String()
			if c.want == "" && got != "none" {
				t.Errorf("violations %s, want none", got)
			}
			if c.want != "" && r.violations.get(c.want) == 0 {
				t.Errorf("violations %s, want %s", got, c.want)
			}
		})
	}
}

// Check 4's long-wait requirement is judged once enough runs ended before the first fault.
func TestFaultFreeLongWaits(t *testing.T) {
	run := func(id string, end time.Duration) runRecord { return runRecord{client: id, id: id, end: end} }
	cases := []struct {
		name  string
		runs  []runRecord
		waits map[string]time.Duration
		want  bool // a violation
	}{
		{"one run, no wait: unjudged", []runRecord{run("a", time.Second)}, nil, false},
		{"three runs, none waited", []runRecord{run("a", time.Second), run("b", 2*time.Second), run("c", 3*time.Second)}, nil, true},
		{"three runs, one waited", []runRecord{run("a", time.Second), run("b", 2*time.Second), run("c", 3*time.Second)},
			map[string]time.Duration{"c": 3 * time.Second}, false},
		{"runs after the phase do not count", []runRecord{run("a", time.Second), run("b", 20*time.Second), run("c", 30*time.Second)}, nil, false},
	}
	for _, c := range cases {
		r := &report{}
		checkFaultFree(c.runs, c.waits, 10*time.Second, false, r, &counter{})
		if got := r.violations.get("faultfree_no_long_wait") > 0; got != c.want {
			t.Errorf("%s: violation = %v, want %v", c.name, got, c.want)
		}
	}
}
