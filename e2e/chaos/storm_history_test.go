package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// stormIn is an operation of the storm's history as the model sees it: what it asked, and its
// own call and return on the resource's clock (the model reasons about expiry with them).
type stormIn struct {
	kind      string
	key       string
	token     uint64 // renew, release: the lease's
	call, ret int64
	ended     bool // a release whose answer was lost: released, or it had expired
}

type stormOut struct {
	ok    bool
	token uint64 // acquire: the grant's
}

// stormState is one key's register: the live lease's token (0: none), the earliest instant its
// store may expire it (its last granting or renewing call plus the TTL: the store's expiry
// counts from a moment inside the call), and the greatest token granted.
type stormState struct {
	live        uint64
	earliestExp int64
	greatest    uint64
}

// stormModel is the lease contract with expiry, per key:
//   - a grant is legal only if no lease is live, or the live one may have expired by the
//     grant's return; its token is above every earlier one;
//   - a refused acquire needs a live lease (which may have expired unseen: the model cannot
//     tell when the store noticed);
//   - a renew or release succeeds only for the live lease; one refused for the live lease is
//     legal only once it may have expired, and ends it.
func stormModel(ttl time.Duration) porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			for _, op := range ops {
				k := op.Input.(stormIn).key
				by[k] = append(by[k], op)
			}
			keys := make([]string, 0, len(by))
			for k := range by {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any { return stormState{} },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(stormState), in.(stormIn), out.(stormOut)
			mayHaveExpired := s.live != 0 && s.earliestExp <= i.ret
			switch i.kind {
			case "acquire":
				if !o.ok {
					return s.live != 0, s
				}
				if (s.live != 0 && !mayHaveExpired) || o.token <= s.greatest {
					return false, s
				}
				return true, stormState{live: o.token, earliestExp: i.call + int64(ttl), greatest: o.token}
			case "renew":
				if o.ok {
					if s.live != i.token {
						return false, s
					}
					s.earliestExp = max(s.earliestExp, i.call+int64(ttl))
					return true, s
				}
			case "release":
				if i.ended { // it released the live lease, or found it ended
					if s.live == i.token {
						return true, stormState{greatest: s.greatest}
					}
					return true, s
				}
				if o.ok {
					return s.live == i.token, stormState{greatest: s.greatest}
				}
			}
			// A refused renew or release: of another lease, or of the live one once it may have
			// expired, which ends it.
			if s.live != i.token {
				return true, s
			}
			return mayHaveExpired, stormState{greatest: s.greatest}
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(stormIn), out.(stormOut)
			if i.kind == "acquire" {
				if o.ok {
					return fmt.Sprintf("acquire(%s) -> token %d [%d, %d]", i.key, o.token, i.call, i.ret)
				}
				return fmt.Sprintf("acquire(%s) -> refused [%d, %d]", i.key, i.call, i.ret)
			}
			return fmt.Sprintf("%s(%s, token %d) -> %v [%d, %d]", i.kind, i.key, i.token, o.ok, i.call, i.ret)
		},
		DescribeState: func(st any) string {
			s := st.(stormState)
			return fmt.Sprintf("live %d (may expire from %d), greatest %d", s.live, s.earliestExp, s.greatest)
		},
	}
}

// checkStormHistory checks the storm's operations against stormModel: violations are named
// history_not_linearizable (with the offending key's last linearizable operations) or
// history_unchecked (the check did not finish).
func checkStormHistory(ops []stormOp, r *report) {
	pops := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		pops = append(pops, porcupine.Operation{ClientId: op.client, Call: int64(op.call), Return: int64(op.ret),
			Input:  stormIn{kind: op.kind, key: op.key, token: op.token, call: int64(op.call), ret: int64(op.ret), ended: op.ended},
			Output: stormOut{ok: op.ok, token: op.token}})
	}
	m := stormModel(stormTTL)
	res, info := porcupine.CheckOperationsVerbose(m, pops, time.Minute)
	switch res {
	case porcupine.Unknown:
		r.violate("history_unchecked", "the check of %d operations did not finish in 10 minutes", len(pops))
	case porcupine.Illegal:
		parts := m.Partition(pops)
		for i, part := range info.PartialLinearizationsOperations() {
			longest := []porcupine.Operation{}
			for _, p := range part {
				if len(p) > len(longest) {
					longest = p
				}
			}
			if len(longest) == len(parts[i]) {
				continue // this key's history is linearizable
			}
			msg := fmt.Sprintf("%d of %d operations on the key linearize; the longest such prefix ends with:", len(longest), len(parts[i]))
			for _, op := range longest[max(0, len(longest)-6):] {
				msg += "\n      " + m.DescribeOperation(op.Input, op.Output)
			}
			r.violate("history_not_linearizable", "%s", msg)
		}
	}
}
