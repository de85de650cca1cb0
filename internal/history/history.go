// Package history records the operations of concurrent lease holders, each as an invocation and
// a response on one monotonic clock, and checks the history with a linearizability checker
// (porcupine, the one etcd's robustness tests use) against a sequential model of the lease
// contract: a register per key holding the live lease's token, with
//
//   - acquire: granted only while no lease is live, with a token greater than every token
//     granted before it (in the linearization, which respects real time); refused only while a
//     lease is live;
//   - renew: succeeds only for the live lease; refused (not held) only for another;
//   - release: ends the live lease; refused (not held) only for another.
//
// A store without fencing tokens (Redlock) is checked by a weaker model (Loose): its tokens are
// not compared, and a refusal needs no live lease (contenders that split the nodes' votes are
// all refused).
//
// Model has no clock: a history in which a lease may expire (a holder that stops renewing) is
// outside it. It catches what counting overlaps cannot: a grant or a renew that no order of the
// operations consistent with real time explains, such as a stale read of the holder.
//
// Fenced (fenced.go) is the model for histories with expiry and a fenced resource, where holders
// are killed or frozen (the fault harness e2e/chaos): every operation carries its call and
// return times, a grant over a live lease is legal only once that lease could have expired
// (its grant or last renew at least TTL*(1-drift) before the grant's return), the register also
// holds the greatest token the resource accepted, and a holder's write on the resource is an
// operation: accepted exactly when its token is not below that, and legal after its lease went
// (released, or passed on) only if the holder was frozen. Operations of unknown outcome return
// never (porcupine's convention, as in etcd's robustness tests) and are accepted either way.
//
// Queue (queue.go) is the per-resource job queue as a fenced resource sees it: acknowledged
// submits run to completion, in submission order, attempts on one resource never overlap, and
// a result is applied at most once per token.
package history

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation of the model.
type Kind uint8

const (
	Acquire Kind = iota
	Renew
	Release
)

func (k Kind) String() string { return [...]string{"acquire", "renew", "release"}[k] }

// input is what an operation asked: its key, and for renew and release the lease's token.
type input struct {
	kind  Kind
	key   string
	token uint64
}

// output is its answer: ok (granted, renewed, released), and an acquire's token.
type output struct {
	ok    bool
	token uint64
}

// state is a key's register: the live lease's token (0: none) and the greatest token granted.
type state struct{ live, greatest uint64 }

// Model is the lease contract, partitioned by key.
var Model = model(false)

// Loose is Model for a store without fencing tokens: grants never overlap, renewals and releases
// are as in Model, tokens are not compared and any acquire may be refused.
var Loose = model(true)

func model(loose bool) porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			return partition(ops, func(op porcupine.Operation) string { return op.Input.(input).key })
		},
		Init: func() any { return state{} },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(state), in.(input), out.(output)
			switch i.kind {
			case Acquire:
				if !o.ok {
					return loose || s.live != 0, s
				}
				return s.live == 0 && (loose || o.token > s.greatest), state{live: o.token, greatest: max(o.token, s.greatest)}
			case Renew:
				return o.ok == (s.live == i.token), s
			default: // Release
				if o.ok {
					return s.live == i.token, state{greatest: s.greatest}
				}
				return s.live != i.token, s
			}
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			switch {
			case i.kind == Acquire && o.ok:
				return fmt.Sprintf("acquire(%s) -> token %d", i.key, o.token)
			case i.kind == Acquire:
				return fmt.Sprintf("acquire(%s) -> refused", i.key)
			default:
				return fmt.Sprintf("%s(%s, token %d) -> %v", i.kind, i.key, i.token, o.ok)
			}
		},
		DescribeState: func(st any) string {
			s := st.(state)
			return fmt.Sprintf("live %d, greatest %d", s.live, s.greatest)
		},
	}
}

// Recorder collects a history. It is safe for concurrent use.
type Recorder struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
}

// NewRecorder starts a history; its clock is the process's monotonic one.
func NewRecorder() *Recorder { return &Recorder{base: time.Now()} }

// Now is the recorder's clock: take it right before the call and right after the answer.
func (r *Recorder) Now() int64 { return int64(time.Since(r.base)) }

// Add records one operation of client on key, called at call and answered at ret (Now): for
// renew and release, token is the lease's; ok is the answer (granted, renewed, released); got is
// an acquire's token. An operation whose answer is unknown (an error) must not be recorded: the
// model has no room for it.
func (r *Recorder) Add(client int, kind Kind, key string, token uint64, call, ret int64, ok bool, got uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Call: call, Return: ret,
		Input: input{kind: kind, key: key, token: token}, Output: output{ok: ok, token: got}})
}

// Len is the number of operations recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Check checks the history against m (Model or Loose) within timeout. It returns nil if it is linearizable,
// an error describing the longest linearizable prefix of the offending key otherwise, or an error
// saying the check timed out.
func (r *Recorder) Check(m porcupine.Model, timeout time.Duration) error {
	r.mu.Lock()
	ops := append([]porcupine.Operation(nil), r.ops...)
	r.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("history: the check of %d operations did not finish within %s", len(ops), timeout)
	}
	return fmt.Errorf("history: not linearizable against the lease model (%d operations):\n%s", len(ops), describe(m, info))
}

// describe names, for each partition that failed, the operations of its longest linearizable
// prefix that porcupine found, and the ones it could not place.
func describe(m porcupine.Model, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	for i, part := range info.PartialLinearizationsOperations() {
		if len(part) == 0 {
			continue
		}
		longest := part[0]
		for _, p := range part {
			if len(p) > len(longest) {
				longest = p
			}
		}
		fmt.Fprintf(&b, "  partition %d: a linearizable prefix of %d operations:\n", i, len(longest))
		for _, op := range longest[max(0, len(longest)-8):] {
			fmt.Fprintf(&b, "    client %d: %s\n", op.ClientId, m.DescribeOperation(op.Input, op.Output))
		}
	}
	return b.String()
}
