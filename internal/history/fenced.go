package history

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// Fenced is the lease contract with expiry and the fenced resource, for histories in which
// holders are killed or frozen (the fault harness, e2e/chaos). Per key it is a register holding
// the live lease's token, a lower bound of the instant it was granted or last renewed (its
// store-side expiry comes at least minTTL after that), the greatest token granted, and the
// greatest token the fenced resource accepted. Times are the recorder's clock (nanoseconds);
// every operation carries its own call and return times so that the model can compare them
// with a lease's expiry.
//
//   - Grant(token) is legal only if the token is greater than every token granted before, and
//     no lease is live, or the live one could have expired by the grant's return: it was granted
//     or last renewed at or before return - minTTL. minTTL is the TTL shortened by the clock
//     drift the caller allows between the recorder and the store.
//   - Renew: succeeds only for the live lease; refused only for another lease, or for the live
//     one if it could have expired by the refusal's return (it has then ended).
//   - Release: ends the live lease; refused only for another, or for the live one if it could
//     have expired by the refusal's return (it has then ended), as a renew.
//   - Write(token, accepted, stalled): a call of a holder's work on the fenced resource. The
//     fence accepts it exactly when its token is not below the greatest the resource accepted
//     before (an accepted write below it, or a refused write that is not, is a violation). A
//     write whose token is not the live lease's (the lease was released, or a newer one was
//     granted before the write) is legal only if the holder was stalled (stopped or frozen
//     during its run), because work stops before the lease goes: a holder that was not frozen
//     must have stopped its work by its local deadline, before the store could grant the key
//     to anyone else. A stalled holder's late write is legal, refused or, if no newer token
//     reached the resource yet, accepted: fencing allows it.
//
// An operation whose outcome is unknown (a process killed mid-call, a cut connection) is
// recorded with an infinite return time (Never) and the model accepts it either way (it took
// effect at some instant after its call, or never), as etcd's robustness tests do with
// porcupine; a caller may bound the return time by the instant after which its effect can no
// longer be told apart, which keeps the search small.
//
// What it cannot see: renewals it is not given (a grant is then checked against the lease's
// grant alone, the weakest bound), the instant a holder's process stopped working beyond the
// recorded calls, and anything in a store's or holder's clock beyond the allowed drift. It is
// sound under these assumptions: it reports no violation for a history the contract allows.
func Fenced(minTTL time.Duration) porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			return partition(ops, func(op porcupine.Operation) string { return op.Input.(FencedInput).Key })
		},
		Init: func() any { return fencedState{} },
		Step: func(st, in, out any) (bool, any) {
			return fencedStep(int64(minTTL), st.(fencedState), in.(FencedInput), out.(FencedOutput))
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(FencedInput), out.(FencedOutput)
			res := "unknown"
			switch {
			case o.Unknown:
			case i.Kind == FencedGrant:
				res = fmt.Sprintf("token %d", i.Token)
			default:
				res = fmt.Sprint(o.OK)
			}
			switch i.Kind {
			case FencedWrite:
				return fmt.Sprintf("%s write(%s, token %d, stalled %v) at %s -> accepted %s", i.Who, i.Key, i.Token, i.Stalled,
					time.Duration(i.Call).Round(time.Millisecond), res)
			case FencedGrant:
				return fmt.Sprintf("%s grant(%s) [%s, %s] -> %s", i.Who, i.Key, time.Duration(i.Call).Round(time.Millisecond),
					describeReturn(o.Return), res)
			}
			return fmt.Sprintf("%s %s(%s, token %d) [%s, %s] -> %s", i.Who, i.Kind, i.Key, i.Token,
				time.Duration(i.Call).Round(time.Millisecond), describeReturn(o.Return), res)
		},
		DescribeState: func(st any) string {
			s := st.(fencedState)
			return fmt.Sprintf("live %d (since %s), greatest %d, resource %d", s.live, time.Duration(s.since).Round(time.Millisecond), s.greatest, s.resource)
		},
	}
}

func describeReturn(ret int64) string {
	if ret == Never {
		return "never"
	}
	return time.Duration(ret).Round(time.Millisecond).String()
}

// Never is the return time of an operation whose outcome is unknown.
const Never = int64(math.MaxInt64)

// FencedKind is an operation of the Fenced model.
type FencedKind uint8

const (
	FencedGrant FencedKind = iota
	FencedRenew
	FencedRelease
	FencedWrite
)

func (k FencedKind) String() string { return [...]string{"grant", "renew", "release", "write"}[k] }

// FencedInput is what an operation of the Fenced model did. Call is the recorder's time at
// which it began; for a grant, the latest time known to be at or before the store granted it
// (the call's start, or later if the store's own record bounds the grant from below).
type FencedInput struct {
	Kind    FencedKind
	Key     string
	Token   uint64 // the lease's token (a grant's: the token granted)
	Call    int64
	Stalled bool   // Write: the holder's process was stopped or frozen during its run
	Who     string // who did it, for the report
}

// FencedOutput is its answer: OK (renewed, released, accepted by the fence; a grant is always
// OK: refusals are not recorded), or Unknown, with the return time (Never when Unknown).
type FencedOutput struct {
	OK, Unknown bool
	Return      int64
}

// fencedState is a key's register in the Fenced model.
type fencedState struct {
	live     uint64 // the live lease's token, 0: none
	since    int64  // a lower bound of the live lease's grant or last renew
	greatest uint64 // the greatest token granted
	resource uint64 // the greatest token the fenced resource accepted
}

// mayHaveExpired says whether the live lease could have expired by ret.
func (s fencedState) mayHaveExpired(minTTL, ret int64) bool {
	return ret == Never || s.since <= ret-minTTL
}

// refused says whether a renew or release of token refused at ret is legal: for another lease
// than the live one, or for the live one once it could have expired (it has then ended).
func (s fencedState) refused(minTTL int64, token uint64, ret int64) (bool, fencedState) {
	switch {
	case s.live != token:
		return true, s
	case s.mayHaveExpired(minTTL, ret):
		s.live = 0 // it expired
		return true, s
	}
	return false, s
}

func fencedStep(minTTL int64, s fencedState, i FencedInput, o FencedOutput) (bool, fencedState) {
	switch i.Kind {
	case FencedGrant:
		if o.Unknown {
			// Granted at some point, or never: an unknown grant's token is known only if the
			// holder used it, and then it is recorded as granted.
			return true, s
		}
		if i.Token <= s.greatest || s.live != 0 && !s.mayHaveExpired(minTTL, o.Return) {
			return false, s
		}
		s.live, s.since, s.greatest = i.Token, i.Call, i.Token
		return true, s
	case FencedRenew:
		switch {
		case o.Unknown:
			return true, s // a renew that may have succeeded extends nothing the model relies on
		case o.OK:
			if s.live != i.Token {
				return false, s
			}
			s.since = max(s.since, i.Call)
			return true, s
		}
		return s.refused(minTTL, i.Token, o.Return)
	case FencedRelease:
		switch {
		case o.Unknown:
			if s.live == i.Token {
				s.live = 0 // taking effect is the weaker assumption for what follows
			}
			return true, s
		case o.OK:
			if s.live != i.Token {
				return false, s
			}
			s.live = 0
			return true, s
		}
		return s.refused(minTTL, i.Token, o.Return)
	default: // FencedWrite
		if o.Unknown {
			if i.Token >= s.resource {
				s.resource = i.Token // accepted, at the instant it is linearized at
			}
			return true, s
		}
		if o.OK != (i.Token >= s.resource) {
			return false, s // the fence accepted a stale token, or refused a current one
		}
		if i.Token != s.live && !i.Stalled {
			return false, s // a holder not frozen worked after its lease went
		}
		if o.OK {
			s.resource = i.Token
		}
		return true, s
	}
}
