package chaos

import (
	"testing"
	"time"
)

// TestStormHistory checks the storm's history mapping and check on made-up operations and
// resource calls: each case a bug would produce must be a violation, and each legal case (a
// grant after the TTL of an abandoned lease, a lost release) not.
func TestStormHistory(t *testing.T) {
	const k = "storm/k"
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	acq := func(c int, call, ret int, tok uint64) stormOp {
		return stormOp{client: c, kind: "acquire", key: k, call: ms(call), ret: ms(ret), ok: true, token: tok, grantedFrom: ms(call)}
	}
	op := func(c int, kind string, call, ret int, tok uint64, ok bool) stormOp {
		return stormOp{client: c, kind: kind, key: k, call: ms(call), ret: ms(ret), ok: ok, token: tok}
	}
	lostRelease := func(c, call, ret int, tok uint64) stormOp {
		return stormOp{client: c, kind: "release", key: k, call: ms(call), ret: ms(ret), token: tok, ended: true}
	}
	write := func(c, at int, tok uint64, accepted bool, run string) event {
		return event{Kind: "write", Key: k, Client: "s" + string(rune('0'+c)), Run: run, Token: tok, At: ms(at), Accepted: accepted}
	}
	ttl := int(stormTTL / time.Millisecond)
	cases := []struct {
		name   string
		ops    []stormOp
		events []event
		legal  bool
	}{
		{"grant, write, release, grant", []stormOp{acq(1, 0, 10, 1), op(1, "release", 20, 30, 1, true), acq(2, 40, 50, 2)},
			[]event{write(1, 15, 1, true, "a")}, true},
		{"grant beside a live lease", []stormOp{acq(1, 0, 10, 1), acq(2, 20, 30, 2)}, nil, false},
		{"grant after an abandoned lease's TTL", []stormOp{acq(1, 0, 100, 1), acq(2, 120, ttl+5, 2)}, nil, true},
		{"grant just before the TTL", []stormOp{acq(1, 100, 110, 1), acq(2, 120, ttl+60, 2)}, nil, false},
		{"renew keeps the lease", []stormOp{acq(1, 0, 10, 1), op(1, "renew", ttl-100, ttl-90, 1, true), acq(2, 20, ttl+50, 2)}, nil, false},
		{"token goes back", []stormOp{acq(1, 0, 10, 5), op(1, "release", 20, 30, 5, true), acq(2, 40, 50, 3)}, nil, false},
		{"renew refused while live", []stormOp{acq(1, 0, 10, 1), op(1, "renew", 20, 30, 1, false)}, nil, false},
		{"release of an ended lease", []stormOp{acq(1, 0, 10, 1), op(1, "release", 20, 30, 1, true), op(1, "release", 40, 50, 1, true)}, nil, false},
		{"a lost release ends the lease", []stormOp{acq(1, 0, 10, 1), lostRelease(1, 20, 900, 1), acq(2, 30, 910, 2)}, nil, true},
		{"a lost release of an expired lease", []stormOp{acq(1, 0, 10, 1), acq(2, 20, ttl+5, 2), lostRelease(1, 20, ttl+10, 1)}, nil, true},
		{"a write after the lease went, holder not frozen", []stormOp{acq(1, 0, 10, 1), op(1, "release", 20, 30, 1, true), acq(2, 40, 50, 2)},
			[]event{write(1, 60, 1, true, "late")}, false},
		{"a frozen holder's late write, refused", []stormOp{acq(1, 0, 10, 1), acq(2, 20, ttl+5, 2)},
			[]event{write(2, ttl+10, 2, true, "b"), write(1, ttl+20, 1, false, "frozen")}, true},
		{"a stale write accepted", []stormOp{acq(1, 0, 10, 1), acq(2, 20, ttl+5, 2)},
			[]event{write(2, ttl+10, 2, true, "b"), write(1, ttl+20, 1, true, "frozen")}, false},
	}
	for _, c := range cases {
		r, notes := &report{}, &counter{}
		ops := resolveUnsure(c.ops, nil)
		checkStormHistory(stormHistory(ops, c.events, func(run string) bool { return run == "frozen" }), time.Minute, r, notes)
		if got := r.violations.get("history_not_linearizable") == 0; got != c.legal {
			t.Errorf("%s: legal = %v, want %v (%s)", c.name, got, c.legal, r.violations.String())
		}
	}
}
