package history

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fop is one operation of a synthetic Fenced history on key "k": times in milliseconds, ret -1
// for an unknown outcome.
type fop struct {
	client    int
	kind      FencedKind
	token     uint64
	call, ret int64
	ok        bool
	stalled   bool
}

const ms = int64(time.Millisecond)

func checkFenced(ops ...fop) error {
	var r FencedRecorder
	for _, o := range ops {
		out := FencedOutput{OK: o.ok, Return: o.ret * ms}
		if o.ret < 0 {
			out = FencedOutput{Unknown: true}
		}
		r.Add(o.client, FencedInput{Kind: o.kind, Key: "k", Token: o.token, Call: o.call * ms, Stalled: o.stalled}, out)
	}
	return r.Check(1000*time.Millisecond, 10*time.Second)
}

// The model accepts what the contract allows with expiry and a fenced resource, and refuses
// each anomaly the fault harness looks for: a grant while the lease could not have expired, a
// token that does not grow, a write accepted below a token the resource saw, a holder that was
// not frozen still working after its lease was released or passed on (the release before CMD
// exits, the long-wait loss).
func TestFencedModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		ops  []fop
	}{
		{"a lease's life, then the next", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedWrite, 3, 20, 21, true, false},
			{0, FencedRelease, 3, 30, 40, true, false}, {1, FencedGrant, 5, 5, 50, true, false},
			{1, FencedWrite, 5, 60, 61, true, false}}},
		{"a takeover after the holder could have expired", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {1, FencedGrant, 5, 5, 1000, true, false}}},
		{"a takeover before the holder could have expired", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {1, FencedGrant, 5, 5, 999, true, false}}},
		{"a renew pushes the expiry", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRenew, 3, 500, 510, true, false},
			{1, FencedGrant, 5, 5, 1400, true, false}}},
		{"a renew refused after the lease could have expired", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRenew, 3, 900, 1001, false, false}}},
		{"a renew refused while the lease is live", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRenew, 3, 900, 990, false, false}}},
		// A holder whose grant's answer came after its deadline (a delayed network) releases a
		// lease that has expired, with no grant after it: the store refuses the release. Found by
		// a PostgreSQL storm of a million grants, which the model failed on four keys.
		{"a release refused after the lease could have expired", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRelease, 3, 900, 1001, false, false}}},
		{"a release refused while the lease is live", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRelease, 3, 900, 990, false, false}}},
		{"a token that does not grow", false, []fop{
			{0, FencedGrant, 5, 0, 10, true, false}, {0, FencedRelease, 5, 20, 30, true, false},
			{1, FencedGrant, 4, 40, 50, true, false}}},
		{"concurrent grants in either order", true, []fop{
			{0, FencedGrant, 5, 0, 2000, true, false}, {1, FencedGrant, 4, 0, 2000, true, false}}},
		{"an unknown release frees the key", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedWrite, 3, 20, 21, true, false},
			{0, FencedRelease, 3, 30, -1, false, false}, {1, FencedGrant, 5, 40, 50, true, false}}},
		{"an unknown release need not have happened", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRelease, 3, 15, -1, false, false},
			{0, FencedWrite, 3, 20, 21, true, false}}},
		{"a write after the holder's own release", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRelease, 3, 20, 30, true, false},
			{0, FencedWrite, 3, 40, 41, true, false}}},
		{"a write after the next grant, holder not stalled", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedRelease, 3, 20, 30, true, false},
			{1, FencedGrant, 5, 5, 35, true, false}, {0, FencedWrite, 3, 40, 41, false, false}}},
		{"a stalled holder's late write, refused", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedWrite, 3, 20, 21, true, true},
			{1, FencedGrant, 5, 5, 1100, true, false}, {1, FencedWrite, 5, 1200, 1201, true, false},
			{0, FencedWrite, 3, 1300, 1301, false, true}}},
		{"a stalled holder's late write before the new token reached the resource", true, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {1, FencedGrant, 5, 5, 1100, true, false},
			{0, FencedWrite, 3, 1150, 1151, true, true}, {1, FencedWrite, 5, 1200, 1201, true, false}}},
		{"a write accepted below a token the resource saw", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {1, FencedGrant, 5, 5, 1100, true, false},
			{1, FencedWrite, 5, 1200, 1201, true, false}, {0, FencedWrite, 3, 1300, 1301, true, true}}},
		{"a current write refused", false, []fop{
			{0, FencedGrant, 3, 0, 10, true, false}, {0, FencedWrite, 3, 20, 21, false, false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkFenced(c.ops...)
			if (err == nil) != c.ok {
				t.Fatalf("want linearizable %v, got %v", c.ok, err)
			}
			if err != nil && !strings.Contains(err.Error(), "not linearizable") {
				t.Fatalf("want a violation, got %v", err)
			}
		})
	}
}

// A check that does not finish is reported as unchecked, never as passed.
func TestFencedUnchecked(t *testing.T) {
	// Concurrent writes that fit in any order, then one that fits after none of them: finding
	// that no order works means trying every subset of the concurrent ones (2^20), far longer
	// than the timeout.
	var r FencedRecorder
	for i := range 20 {
		r.Add(i, FencedInput{Kind: FencedWrite, Key: "k", Token: 3, Call: 0, Stalled: true}, FencedOutput{OK: true, Return: 100 * ms})
	}
	r.Add(20, FencedInput{Kind: FencedWrite, Key: "k", Token: 2, Call: 200 * ms}, FencedOutput{OK: true, Return: 201 * ms})
	var unchecked *UncheckedError
	if err := r.Check(time.Second, time.Millisecond); !errors.As(err, &unchecked) {
		t.Fatalf("want an unchecked history, got %v", err)
	}
}

// An unknown outcome with a bounded return time may still take effect at any instant up to it,
// or not at all.
func TestFencedUnknownBounded(t *testing.T) {
	var r FencedRecorder
	r.Add(0, FencedInput{Kind: FencedGrant, Key: "k", Token: 3, Call: 0}, FencedOutput{OK: true, Return: 10 * ms})
	r.Add(0, FencedInput{Kind: FencedRelease, Key: "k", Token: 3, Call: 15 * ms}, FencedOutput{Unknown: true, Return: 1200 * ms})
	r.Add(0, FencedInput{Kind: FencedWrite, Key: "k", Token: 3, Call: 20 * ms}, FencedOutput{OK: true, Return: 21 * ms})
	r.Add(1, FencedInput{Kind: FencedGrant, Key: "k", Token: 5, Call: 30 * ms}, FencedOutput{OK: true, Return: 40 * ms})
	if err := r.Check(time.Second, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	r.Add(0, FencedInput{Kind: FencedWrite, Key: "k", Token: 3, Call: 50 * ms}, FencedOutput{OK: false, Return: 51 * ms})
	if err := r.Check(time.Second, 10*time.Second); err == nil {
		t.Fatal("a write of the released holder after the next grant passed")
	}
}
