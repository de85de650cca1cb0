package history

import (
	"strings"
	"testing"
	"time"
)

// qop is one operation of a synthetic Queue history on resource "r": a submit of job (call and
// ret in ms, tok 0), or a call of job (0: a lock holder) with token tok at call (ms).
type qop struct {
	submit    bool
	job       int64
	tok       uint64
	call, ret int64
	kind      string // enter, write, exit, ok (an exit whose work completed)
	accepted  bool
	stalled   bool
}

func sub(job, call, ret int64) qop { return qop{submit: true, job: job, call: call, ret: ret} }
func cl(job int64, tok uint64, at int64, kind string, accepted bool) qop {
	return qop{job: job, tok: tok, call: at, kind: kind, accepted: accepted}
}

func stall(o qop) qop { o.stalled = true; return o }

func checkQueue(ops ...qop) error {
	var r QueueRecorder
	for i, o := range ops {
		if o.submit {
			r.Submit("r", o.job, o.call*ms, o.ret*ms)
			continue
		}
		kind, ok := o.kind, false
		if kind == "ok" {
			kind, ok = "exit", true
		}
		r.Call(i, QueueInput{Resource: "r", Job: o.job, Token: o.tok, Call: kind, OK: ok, Stalled: o.stalled}, o.accepted, o.call*ms)
	}
	return r.Check(10 * time.Second)
}

// The queue model accepts jobs run in submission order, retried attempts, lock holders between
// them and a stalled attempt fenced out, and refuses each anomaly of the jobs test: an
// acknowledged job that never ran, a job run out of order or again once the next one ran,
// overlapping attempts, a stale call accepted, a result applied twice under one token.
func TestQueueModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		ops  []qop
	}{
		{"two jobs in order, a lock holder between", true, []qop{
			sub(1, 0, 5), sub(2, 6, 10),
			cl(1, 3, 20, "enter", true), cl(1, 3, 30, "ok", true),
			cl(0, 4, 40, "enter", true), cl(0, 4, 50, "ok", true),
			cl(2, 5, 60, "enter", true), cl(2, 5, 70, "ok", true)}},
		{"a claim before the submit's acknowledgement", true, []qop{
			sub(1, 0, 50), cl(1, 3, 20, "enter", true), cl(1, 3, 30, "ok", true)}},
		{"a retried attempt, a stalled one fenced out", true, []qop{
			sub(1, 0, 5), sub(2, 6, 10),
			cl(1, 3, 20, "enter", true), cl(1, 5, 30, "enter", true),
			stall(cl(1, 3, 40, "write", false)),
			cl(1, 5, 50, "ok", true), cl(2, 6, 60, "enter", true), cl(2, 6, 70, "ok", true)}},
		{"an acknowledged job that never ran", false, []qop{
			sub(1, 0, 5), sub(2, 6, 10), cl(1, 3, 20, "enter", true), cl(1, 3, 30, "ok", true)}},
		{"out of submission order", false, []qop{
			sub(1, 0, 5), sub(2, 6, 10),
			cl(2, 3, 20, "enter", true), cl(2, 3, 30, "ok", true),
			cl(1, 4, 40, "enter", true), cl(1, 4, 50, "ok", true)}},
		{"the next job before the head's work completed", false, []qop{
			sub(1, 0, 5), sub(2, 6, 10),
			cl(1, 3, 20, "enter", true), cl(1, 3, 30, "exit", true),
			cl(2, 4, 40, "enter", true), cl(2, 4, 50, "ok", true)}},
		{"a job again once the next one ran", false, []qop{
			sub(1, 0, 5), sub(2, 6, 10),
			cl(1, 3, 20, "enter", true), cl(1, 3, 30, "ok", true),
			cl(2, 4, 40, "enter", true), cl(2, 4, 50, "ok", true),
			cl(1, 5, 60, "enter", true), cl(1, 5, 70, "ok", true)}},
		{"overlapping attempts, holder not stalled", false, []qop{
			sub(1, 0, 5), cl(1, 3, 20, "enter", true), cl(1, 5, 30, "enter", true),
			cl(1, 3, 40, "write", false), cl(1, 5, 50, "ok", true)}},
		{"a stale call accepted", false, []qop{
			sub(1, 0, 5), cl(1, 3, 20, "enter", true), cl(0, 5, 30, "enter", true),
			stall(cl(1, 3, 40, "write", true)), cl(1, 6, 50, "enter", true), cl(1, 6, 60, "ok", true)}},
		{"a result applied twice under one token", false, []qop{
			sub(1, 0, 5), cl(1, 3, 20, "enter", true), cl(1, 3, 30, "ok", true), cl(1, 3, 40, "ok", true)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkQueue(c.ops...)
			if (err == nil) != c.ok {
				t.Fatalf("want linearizable %v, got %v", c.ok, err)
			}
			if err != nil && !strings.Contains(err.Error(), "not linearizable") {
				t.Fatalf("want a violation, got %v", err)
			}
		})
	}
}
