package history

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// partition splits ops by key, keys in sorted order.
func partition(ops []porcupine.Operation, key func(porcupine.Operation) string) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range ops {
		k := key(op)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], op)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

// FencedRecorder collects a history for the Fenced model. It is not safe for concurrent use:
// the fault harness builds it from its records after the run.
type FencedRecorder struct {
	ops []porcupine.Operation
}

// Add records one operation by client, called at in.Call and answered at out.Return; an
// operation of unknown outcome (out.Unknown) returns Never unless out.Return bounds it: the
// instant after which taking effect or not can no longer make a difference (a release, once
// its lease has certainly expired and its holder has ended).
func (r *FencedRecorder) Add(client int, in FencedInput, out FencedOutput) {
	if out.Unknown && out.Return == 0 {
		out.Return = Never
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Call: in.Call, Return: out.Return, Input: in, Output: out})
}

// Len is the number of operations recorded.
func (r *FencedRecorder) Len() int { return len(r.ops) }

// Check checks the history against Fenced(minTTL) within timeout: nil if linearizable, an error
// naming the longest linearizable prefix of the offending key otherwise, or an error saying the
// check did not finish (*UncheckedError).
func (r *FencedRecorder) Check(minTTL, timeout time.Duration) error {
	m := Fenced(minTTL)
	ops := tightenGrants(r.ops)
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return &UncheckedError{Ops: len(ops), Timeout: timeout}
	}
	return fmt.Errorf("history: not linearizable against the fenced lease model (%d operations):\n%s", len(ops), describeFenced(m, ops, info))
}

// opKey is the key (resource) of an operation of Fenced or Queue.
func opKey(op porcupine.Operation) string {
	if i, ok := op.Input.(QueueInput); ok {
		return i.Resource
	}
	return op.Input.(FencedInput).Key
}

// describeFenced names, for each key that failed (Fenced or Queue), the last operations of the longest
// linearizable prefix porcupine found, the state it leaves, and the operations with the
// earliest calls that it could not place after it.
func describeFenced(m porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	parts := m.Partition(ops)
	for p, lins := range info.PartialLinearizations() {
		if len(lins) == 0 || p >= len(parts) {
			continue
		}
		part := parts[p]
		longest := lins[0]
		for _, l := range lins {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue // this key's history is linearizable: another key failed
		}
		st := m.Init()
		placed := make([]bool, len(part))
		for _, i := range longest {
			_, st = m.Step(st, part[i].Input, part[i].Output)
			placed[i] = true
		}
		fmt.Fprintf(&b, "  key %s: a linearizable prefix of %d of %d operations ends with:\n", opKey(part[0]), len(longest), len(part))
		for _, i := range longest[max(0, len(longest)-6):] {
			fmt.Fprintf(&b, "    %s\n", m.DescribeOperation(part[i].Input, part[i].Output))
		}
		fmt.Fprintf(&b, "  leaving %s; none of the next can follow:\n", m.DescribeState(st))
		var rest []porcupine.Operation
		for i, op := range part {
			if !placed[i] {
				rest = append(rest, op)
			}
		}
		sort.SliceStable(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
		for _, op := range rest[:min(4, len(rest))] {
			fmt.Fprintf(&b, "    %s\n", m.DescribeOperation(op.Input, op.Output))
		}
	}
	return b.String()
}

// UncheckedError says a check did not finish within its timeout: the history is neither
// passed nor failed.
type UncheckedError struct {
	Ops     int
	Timeout time.Duration
}

func (e *UncheckedError) Error() string {
	return fmt.Sprintf("history: the check of %d operations did not finish within %s", e.Ops, e.Timeout)
}
