package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Queue is the per-resource job queue's contract as a fenced resource sees it, for the fault
// harness's jobs test. Per resource it is a register holding the jobs submitted in their
// linearized order, how many of them are done, whether the head's work completed (an accepted
// successful exit), the greatest token the resource accepted and the tokens whose result was
// applied. Operations:
//
//   - Submit(job): appends the job to its resource's queue (the submit was acknowledged).
//   - Call(job, token, kind, accepted, stalled): a call of an attempt's CMD on the resource
//     (job 0: a lock holder on the same resource). The fence accepts it exactly when its token
//     is not below the greatest the resource accepted; a call whose token is below it (a newer
//     attempt or holder entered before) is legal only if its holder was stalled: attempts on
//     one resource never overlap. An accepted enter of a job is legal only for the head, or
//     for the job after it once the head's work completed (the head is then done): jobs run in
//     submission order, and a job that is done never runs again. An accepted successful exit
//     applies its token's result, at most once per token.
//   - End: the history is over: every submitted job is done or is the head with its work
//     completed (every acknowledged submit ran).
//
// What it cannot see: claims and completions reported to the server (only the calls on the
// resource), and jobs whose submit was never acknowledged.
var Queue = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		return partition(ops, func(op porcupine.Operation) string { return op.Input.(QueueInput).Resource })
	},
	Init: func() any { return queueState{} },
	Step: func(st, in, out any) (bool, any) {
		return queueStep(st.(queueState), in.(QueueInput), out.(bool))
	},
	Equal: func(a, b any) bool {
		x, y := a.(queueState), b.(queueState)
		return x.done == y.done && x.headOK == y.headOK && x.resource == y.resource &&
			slices.Equal(x.queue, y.queue) && slices.Equal(x.applied, y.applied)
	},
	DescribeOperation: func(in, out any) string {
		i := in.(QueueInput)
		switch i.Kind {
		case QueueSubmit:
			return fmt.Sprintf("submit(%s, job %d) at %s", i.Resource, i.Job, time.Duration(i.At).Round(time.Millisecond))
		case QueueEnd:
			return fmt.Sprintf("end(%s)", i.Resource)
		}
		return fmt.Sprintf("%s %s(%s, job %d, token %d, stalled %v) at %s -> accepted %v", i.Who, i.Call, i.Resource, i.Job, i.Token,
			i.Stalled, time.Duration(i.At).Round(time.Millisecond), out.(bool))
	},
	DescribeState: func(st any) string {
		s := st.(queueState)
		var b strings.Builder
		fmt.Fprintf(&b, "%d of %d jobs done, head's work completed %v, resource %d", s.done, len(s.queue), s.headOK, s.resource)
		if s.done < len(s.queue) {
			fmt.Fprintf(&b, ", head job %d", s.queue[s.done])
		}
		return b.String()
	},
}

// QueueKind is an operation of the Queue model.
type QueueKind uint8

const (
	QueueSubmit QueueKind = iota
	QueueCall
	QueueEnd
)

// QueueInput is one operation of the Queue model; its output is whether the resource accepted
// the call (true for submits and the end).
type QueueInput struct {
	Kind     QueueKind
	Resource string
	Job      int64  // 0: a lock holder's call
	Token    uint64 // Call
	Call     string // Call: enter, write, or exit
	OK       bool   // Call: an exit whose work completed
	Stalled  bool   // Call: the holder was stopped or frozen during the attempt
	At       int64  // the call's time, for the report
	Who      string
}

type queueState struct {
	queue    []int64 // submitted jobs, in linearized order; never changed in place
	done     int
	headOK   bool
	resource uint64
	applied  []uint64 // tokens whose result was applied; never changed in place
}

func queueStep(s queueState, i QueueInput, accepted bool) (bool, queueState) {
	switch i.Kind {
	case QueueSubmit:
		if slices.Contains(s.queue, i.Job) {
			return false, s
		}
		s.queue = append(slices.Clip(s.queue), i.Job)
		return true, s
	case QueueEnd:
		return s.done == len(s.queue) || s.done == len(s.queue)-1 && s.headOK, s
	}
	if accepted != (i.Token >= s.resource) {
		return false, s // the fence accepted a stale token, or refused a current one
	}
	if i.Token < s.resource && !i.Stalled {
		return false, s // an attempt or holder not frozen worked after a newer one entered
	}
	if !accepted {
		return true, s
	}
	s.resource = i.Token
	if i.Job != 0 && i.Call == "enter" {
		switch at := slices.Index(s.queue, i.Job); {
		case at < 0:
			return false, s // not submitted yet
		case at == s.done+1 && s.headOK:
			s.done, s.headOK = s.done+1, false
		case at != s.done:
			return false, s // out of order, or done already
		}
	}
	if i.Call == "exit" && i.OK {
		if slices.Contains(s.applied, i.Token) {
			return false, s // a result applied twice under one token
		}
		s.applied = append(slices.Clip(s.applied), i.Token)
		if i.Job != 0 && s.done < len(s.queue) && s.queue[s.done] == i.Job {
			s.headOK = true
		}
	}
	return true, s
}

// QueueRecorder collects a history for the Queue model. It is not safe for concurrent use.
type QueueRecorder struct {
	ops  []porcupine.Operation
	last int64
}

// Submit records the acknowledged submit of job on resource, called at call and acknowledged
// at ret.
func (r *QueueRecorder) Submit(resource string, job int64, call, ret int64) {
	r.add(porcupine.Operation{ClientId: -1, Call: call, Return: ret,
		Input: QueueInput{Kind: QueueSubmit, Resource: resource, Job: job, At: call}, Output: true})
}

// Call records a call on the resource at instant at (c.At is set from it).
func (r *QueueRecorder) Call(client int, c QueueInput, accepted bool, at int64) {
	c.Kind, c.At = QueueCall, at
	r.add(porcupine.Operation{ClientId: client, Call: at, Return: at + 1, Input: c, Output: accepted})
}

func (r *QueueRecorder) add(op porcupine.Operation) {
	r.last = max(r.last, op.Return)
	r.ops = append(r.ops, op)
}

// Len is the number of operations recorded.
func (r *QueueRecorder) Len() int { return len(r.ops) }

// Check adds the end of each resource's history after every operation recorded and checks it
// against Queue within timeout, as FencedRecorder.Check does.
func (r *QueueRecorder) Check(timeout time.Duration) error {
	ops := slices.Clone(r.ops)
	seen := map[string]bool{}
	for _, op := range r.ops {
		res := op.Input.(QueueInput).Resource
		if !seen[res] {
			seen[res] = true
			ops = append(ops, porcupine.Operation{ClientId: -1, Call: r.last + 1, Return: r.last + 2,
				Input: QueueInput{Kind: QueueEnd, Resource: res}, Output: true})
		}
	}
	res, info := porcupine.CheckOperationsVerbose(Queue, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return &UncheckedError{Ops: len(ops), Timeout: timeout}
	}
	return fmt.Errorf("history: not linearizable against the job queue model (%d operations):\n%s", len(ops), describeFenced(Queue, ops, info))
}
