package chaos

import (
	"testing"
	"time"
)

// TestStormModel checks checkStormHistory on made-up histories: each case a bug would produce
// must be a violation, and each legal case (a grant after the TTL of an abandoned lease) not.
func TestStormModel(t *testing.T) {
	const k = "storm/k"
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	acq := func(c int, call, ret int, tok uint64) stormOp {
		return stormOp{client: c, kind: "acquire", key: k, call: ms(call), ret: ms(ret), ok: tok != 0, token: tok}
	}
	op := func(c int, kind string, call, ret int, tok uint64, ok bool) stormOp {
		return stormOp{client: c, kind: kind, key: k, call: ms(call), ret: ms(ret), ok: ok, token: tok}
	}
	ttl := int(stormTTL / time.Millisecond)
	cases := []struct {
		name  string
		ops   []stormOp
		legal bool
	}{
		{"grant, release, grant", []stormOp{acq(1, 0, 10, 1), op(1, "release", 20, 30, 1, true), acq(2, 40, 50, 2)}, true},
		{"grant beside a live lease", []stormOp{acq(1, 0, 10, 1), acq(2, 20, 30, 2)}, false},
		{"grant after an abandoned lease's TTL", []stormOp{acq(1, 0, 10, 1), acq(2, 20, ttl+5, 2)}, true},
		{"grant just before the TTL", []stormOp{acq(1, 100, 110, 1), acq(2, 120, ttl+90, 2)}, false},
		{"renew keeps the lease", []stormOp{acq(1, 0, 10, 1), op(1, "renew", ttl-100, ttl-90, 1, true), acq(2, 20, ttl+50, 2)}, false},
		{"token goes back", []stormOp{acq(1, 0, 10, 5), op(1, "release", 20, 30, 5, true), acq(2, 40, 50, 3)}, false},
		{"token reused", []stormOp{acq(1, 0, 10, 5), op(1, "release", 20, 30, 5, true), acq(2, 40, 50, 5)}, false},
		{"refused while free", []stormOp{acq(1, 0, 10, 0)}, false},
		{"refused while held", []stormOp{acq(1, 0, 10, 1), acq(2, 20, 30, 0)}, true},
		{"renew refused while live", []stormOp{acq(1, 0, 10, 1), op(1, "renew", 20, 30, 1, false)}, false},
		{"renew refused after expiry", []stormOp{acq(1, 0, 10, 1), op(1, "renew", ttl, ttl+10, 1, false)}, true},
		{"release of an ended lease", []stormOp{acq(1, 0, 10, 1), op(1, "release", 20, 30, 1, true), op(1, "release", 40, 50, 1, true)}, false},
		{"concurrent grants ordered by token", []stormOp{acq(1, 0, 100, 2), op(1, "release", 110, 120, 2, true), acq(2, 0, 100, 1)}, false},
		{"a lost release ends the lease", []stormOp{acq(1, 0, 10, 1), {client: 1, kind: "release", key: k, call: ms(20), ret: ms(900), token: 1, ended: true}, acq(2, 30, 910, 2)}, true},
		{"a lost release of an expired lease", []stormOp{acq(1, 0, 10, 1), acq(2, 20, ttl+5, 2), {client: 1, kind: "release", key: k, call: ms(20), ret: ms(ttl + 10), token: 1, ended: true}}, true},
		{"concurrent grant and release", []stormOp{acq(1, 0, 10, 1), op(1, "release", 20, 100, 1, true), acq(2, 30, 110, 2)}, true},
	}
	for _, c := range cases {
		r := &report{}
		checkStormHistory(c.ops, r)
		if got := r.violations.get("history_not_linearizable") == 0; got != c.legal {
			t.Errorf("%s: legal = %v, want %v (%s)", c.name, got, c.legal, r.violations.String())
		}
	}
}
