package history

import (
	"sort"

	"github.com/anishathalye/porcupine"
)

// tightenGrants raises the call of each known grant to the latest instant at which a lease of
// a lower token on its key is known to have been live: the call of its successful renew or
// release, or a call on the resource by its holder that was not stalled. In every linearization
// the model allows, such an operation comes after its lease's grant and before any grant of a
// greater token (a renew or release succeeds only for the live lease, and a holder that was not
// stalled calls the resource only under it), so the raised call removes no linearization the
// model allows; it only spares the search the orders that fail later. It keeps a run of waiters
// granted one after another, each called long before (a long-poll, a delayed network), from
// making the search exponential: without it, each grant may take the previous lease as expired
// and the search backtracks through every such choice. The grant's call is also the model's
// lower bound of the lease's start, which the raise keeps true.
func tightenGrants(ops []porcupine.Operation) []porcupine.Operation {
	type evidence struct {
		token uint64
		at    int64
	}
	live := map[string][]evidence{} // per key: an instant its token's lease was live
	for _, op := range ops {
		in, out := op.Input.(FencedInput), op.Output.(FencedOutput)
		switch {
		case out.Unknown:
		case in.Kind == FencedRenew && out.OK, in.Kind == FencedRelease && out.OK, in.Kind == FencedWrite && !in.Stalled:
			live[in.Key] = append(live[in.Key], evidence{in.Token, in.Call})
		}
	}
	// Per key, the latest such instant over all tokens below t, for each grant's token t.
	floor := map[string]func(uint64) int64{}
	for key, ev := range live {
		sort.Slice(ev, func(i, j int) bool { return ev[i].token < ev[j].token })
		prefix := make([]int64, len(ev)) // prefix[i]: the latest instant among ev[0..i]
		for i, e := range ev {
			prefix[i] = e.at
			if i > 0 {
				prefix[i] = max(prefix[i], prefix[i-1])
			}
		}
		floor[key] = func(t uint64) int64 {
			i := sort.Search(len(ev), func(i int) bool { return ev[i].token >= t }) // ev[:i] are below t
			if i == 0 {
				return 0
			}
			return prefix[i-1]
		}
	}
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		in := op.Input.(FencedInput)
		if f := floor[in.Key]; in.Kind == FencedGrant && !op.Output.(FencedOutput).Unknown && f != nil {
			if at := f(in.Token); at > in.Call && at < op.Return {
				in.Call = at
				op.Call, op.Input = at, in
			}
		}
		out[i] = op
	}
	return out
}
