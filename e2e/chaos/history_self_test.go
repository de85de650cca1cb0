package chaos

import (
	"testing"
	"time"
)

// Check 9 on made-up runs: what the contract allows passes (a handover by release, a takeover
// after an expiry, a stalled holder fenced out, a Redis run whose release is unknown), and the
// two old bugs' traces fail (a holder working on after its lease was released or passed on,
// a grant while the previous lease could not have expired).
func TestHistoryCheckCatchesViolations(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	base := time.Now()
	ev := func(at int, kind, run string, token uint64, accepted bool) event {
		return event{At: ms(at), Kind: kind, Key: "k", Client: "c-" + run, Run: run, Token: token, Accepted: accepted}
	}
	run := func(id string, start, end, code int) runRecord {
		return runRecord{client: "c-" + id, id: id, start: ms(start), end: ms(end), code: code}
	}
	grant := func(at int, run string, token uint64) auditEvent {
		return auditEvent{Kind: "acquire", Key: "k", Holder: holderPrefix + run, Token: token, At: base.Add(ms(at))}
	}
	release := func(token uint64) auditEvent { return auditEvent{Kind: "release", Key: "k", Token: token} }
	cases := []struct {
		name    string
		runs    []runRecord
		events  []event
		audit   []auditEvent // nil: a store without an audit log
		stalled string       // the run whose client was stopped
		bad     bool
	}{
		{"handover by release", []runRecord{run("a", 0, 300, 0), run("b", 10, 600, 0)}, []event{
			ev(100, "enter", "a", 1, true), ev(200, "exit", "a", 1, true),
			ev(400, "enter", "b", 2, true), ev(500, "exit", "b", 2, true),
		}, []auditEvent{grant(50, "a", 1), grant(350, "b", 2), release(1), release(2)}, "", false},
		{"a write after the holder's lease was released, client not stopped (the release before CMD exits)",
			[]runRecord{run("a", 0, 700, 76), run("b", 10, 600, 0)}, []event{
				ev(100, "enter", "a", 1, true), ev(400, "enter", "b", 2, true),
				ev(450, "write", "a", 1, false), ev(500, "exit", "b", 2, true),
			}, []auditEvent{grant(50, "a", 1), grant(350, "b", 2), release(1), release(2)}, "", true},
		{"a stopped holder's lease expired and passed on: its late write is fenced out", []runRecord{run("a", 0, 1500, 76), run("b", 10, 1400, 0)}, []event{
			ev(100, "enter", "a", 1, true), ev(1200, "enter", "b", 2, true),
			ev(1250, "write", "a", 1, false), ev(1300, "exit", "b", 2, true),
		}, []auditEvent{grant(50, "a", 1), grant(1100, "b", 2), release(2)}, "a", false},
		{"a takeover after the holder expired (killed)", []runRecord{run("a", 0, 200, 137), run("b", 10, 3000, 0)}, []event{
			ev(100, "enter", "a", 1, true), ev(2500, "enter", "b", 2, true),
		}, []auditEvent{grant(50, "a", 1), grant(2400, "b", 2), release(2)}, "", false},
		{"a grant while the holder's lease could not have expired", []runRecord{run("a", 0, 200, 137), run("b", 10, 1000, 0)}, []event{
			ev(100, "enter", "a", 1, true), ev(600, "enter", "b", 2, true),
		}, []auditEvent{grant(50, "a", 1), grant(500, "b", 2), release(2)}, "", true},
		{"the same after a long wait: the audit log's grant bounds it", []runRecord{run("a", 0, 1100, 137), run("b", 10, 1700, 0)}, []event{
			ev(1050, "enter", "a", 1, true), ev(1600, "enter", "b", 2, true),
		}, []auditEvent{grant(1000, "a", 1), grant(1500, "b", 2), release(2)}, "", true},
		{"no audit log: a release of unknown outcome", []runRecord{run("a", 0, 300, 1), run("b", 10, 600, 0)}, []event{
			ev(100, "enter", "a", 1, true), ev(200, "exit", "a", 1, true),
			ev(400, "enter", "b", 2, true), ev(500, "exit", "b", 2, true),
		}, nil, "", false},
		{"no audit log: a write after the next holder's enter", []runRecord{run("a", 0, 300, 0), run("b", 10, 600, 0)}, []event{
			ev(100, "enter", "a", 1, true), ev(200, "enter", "b", 2, true),
			ev(250, "exit", "a", 1, false), ev(500, "exit", "b", 2, true),
		}, nil, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.events {
				c.events[i].Seq = i
			}
			r, notes := &report{}, &counter{}
			checkHistory(lockHistory{key: "k", ttl: time.Second, runs: c.runs, events: c.events, audit: c.audit, base: base,
				stalled: func(rr runRecord) bool { return rr.id == c.stalled }, timeout: time.Minute}, r, notes)
			got := r.violations.get("history_not_linearizable") > 0
			if got != c.bad || r.violations.get("history_unchecked") > 0 {
				t.Errorf("violations %s, want a violation: %v\n%v", r.violations.String(), c.bad, r.examples)
			}
		})
	}
}

// Check 9 of the jobs test on made-up submits and calls: jobs run in order pass; a job run
// before the one submitted ahead of it, or an acknowledged job that never completed, fail.
func TestQueueHistoryCheckCatchesViolations(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ev := func(at int, kind string, job int64, token uint64, status string) event {
		return event{At: ms(at), Kind: kind, Key: "r", Client: "w", Run: "w/" + string(rune('0'+job)), Token: token, Job: job,
			Accepted: true, Status: status}
	}
	subs := []jobSubmit{{job: 1, resource: "r", call: 0, ack: ms(5)}, {job: 2, resource: "r", call: ms(6), ack: ms(10)}}
	for _, c := range []struct {
		name   string
		events []event
		bad    bool
	}{
		{"in order", []event{ev(20, "enter", 1, 3, ""), ev(30, "exit", 1, 3, "ok"), ev(40, "enter", 2, 4, ""), ev(50, "exit", 2, 4, "ok")}, false},
		{"out of order", []event{ev(20, "enter", 2, 3, ""), ev(30, "exit", 2, 3, "ok"), ev(40, "enter", 1, 4, ""), ev(50, "exit", 1, 4, "ok")}, true},
		{"the last job stopped, never completed", []event{ev(20, "enter", 1, 3, ""), ev(30, "exit", 1, 3, "ok"), ev(40, "enter", 2, 4, ""), ev(50, "exit", 2, 4, "term")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.events {
				c.events[i].Seq = i
			}
			r, notes := &report{}, &counter{}
			checkQueueHistory(subs, c.events, func(*runSpan) bool { return false }, time.Minute, r, notes)
			if got := r.violations.get("history_not_linearizable") > 0; got != c.bad || r.violations.get("history_unchecked") > 0 {
				t.Errorf("violations %s, want a violation: %v\n%v", r.violations.String(), c.bad, r.examples)
			}
		})
	}
}
