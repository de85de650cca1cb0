package history

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// chainOfWaiters is what a run of waiters looks like when their answers come late (a
// long-poll, a delayed network): n grants of one key, all called within the first
// milliseconds, each returned as the previous holder's release returned, long after the TTL
// (so each grant could, on its own, take the previous lease as expired).
func chainOfWaiters(n int) *FencedRecorder {
	var r FencedRecorder
	for i := range n {
		tok := uint64(i + 1)
		ret := 5*time.Second + time.Duration(i)*10*time.Millisecond
		r.Add(i, FencedInput{Kind: FencedGrant, Key: "k", Token: tok, Call: int64(time.Duration(i) * time.Millisecond)},
			FencedOutput{OK: true, Return: int64(ret)})
		r.Add(i, FencedInput{Kind: FencedWrite, Key: "k", Token: tok, Call: int64(ret + time.Millisecond)},
			FencedOutput{OK: true, Return: int64(ret + 2*time.Millisecond)})
		r.Add(i, FencedInput{Kind: FencedRelease, Key: "k", Token: tok, Call: int64(ret + 3*time.Millisecond)},
			FencedOutput{OK: true, Return: int64(ret + 9*time.Millisecond)})
	}
	return &r
}

// A chain of 40 waiters is checked (without the tightening, the search backtracks through
// every grant that might have taken its predecessor as expired: it does not finish).
func TestTightenChainOfWaiters(t *testing.T) {
	r := chainOfWaiters(40)
	if err := r.Check(time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The same chain with one grant beside a live lease still fails: the tightening hides
	// no violation.
	r.Add(99, FencedInput{Kind: FencedGrant, Key: "k", Token: 100, Call: int64(5*time.Second + 100*time.Millisecond + 4*time.Millisecond)},
		FencedOutput{OK: true, Return: int64(5*time.Second + 100*time.Millisecond + 5*time.Millisecond)})
	if err := r.Check(time.Second, time.Minute); err == nil {
		t.Fatal("a grant while token 11's holder was between its write and its release passed")
	}
}

// Without the tightening, the chain is not checked within the same time: the tightening is what
// makes it checkable.
func TestTightenNeeded(t *testing.T) {
	r := chainOfWaiters(40)
	if res := porcupine.CheckOperationsTimeout(Fenced(time.Second), r.ops, 2*time.Second); res != porcupine.Unknown {
		t.Skipf("the untightened chain was checked (%v): porcupine's search changed; the tightening is not shown to be needed", res)
	}
}
