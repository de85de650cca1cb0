package chaos

import (
	"sort"
	"time"

	"github.com/batonhq/baton/internal/history"
)

// jobSubmit is one acknowledged submit of the jobs test: the job, its resource, and when the
// submit was called and acknowledged (the harness's clock; a submit retried across a server
// restart is called at its first try).
type jobSubmit struct {
	job       int64
	resource  string
	call, ack time.Duration
}

// checkQueueHistory is check 9 for the jobs test: the acknowledged submits and every call on
// the fenced resource (of job attempts, and of the lock runs on the same resources), checked by
// porcupine against the per-resource queue model (history.Queue): every acknowledged submit
// runs to a completed exit, jobs of a resource enter in submission order and never again once
// the next one entered, calls on one resource never overlap (a call whose token is below one
// that entered before is legal only from a stalled holder, and then refused), and a result is
// applied (an accepted successful exit) at most once per token. stalled says whether a CMD
// execution's holder was stopped. A check that does not finish within timeout is a violation
// (history_unchecked).
func checkQueueHistory(submits []jobSubmit, events []event, stalled func(*runSpan) bool, timeout time.Duration, r *report, notes *counter) {
	sp := spans(events)
	runs := make([]string, 0, len(sp))
	for run := range sp {
		runs = append(runs, run)
	}
	sort.Strings(runs)
	client := map[string]int{}
	for i, run := range runs {
		client[run] = i
	}
	var rec history.QueueRecorder
	for _, s := range submits {
		rec.Submit(s.resource, s.job, int64(s.call), int64(s.ack))
	}
	for _, e := range events {
		rec.Call(client[e.Run], history.QueueInput{Resource: e.Key, Job: e.Job, Token: e.Token, Call: e.Kind,
			OK: e.Kind == "exit" && e.Status == "ok", Stalled: stalled(sp[e.Run]), Who: e.Run}, e.Accepted, int64(e.At))
	}
	notes.add("history_ops", rec.Len())
	checked(func() error { return rec.Check(timeout) }, r, notes)
}
