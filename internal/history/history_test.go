package history

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is one operation of a synthetic history: client, kind, key "k", token asked, [call, ret],
// answer and token got.
type op struct {
	client    int
	kind      Kind
	token     uint64
	call, ret int64
	ok        bool
	got       uint64
}

func check(m porcupine.Model, ops ...op) error {
	r := NewRecorder()
	for _, o := range ops {
		r.Add(o.client, o.kind, "k", o.token, o.call, o.ret, o.ok, o.got)
	}
	return r.Check(m, 10*time.Second)
}

// The model accepts what the contract allows, concurrent operations in either order included,
// and refuses each anomaly: two live leases, a token that does not grow, a refusal of a free key
// (a stale read), a renew or a release of a lease that ended.
func TestModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		ops  []op
	}{
		{"a lease's life, then the next", true, []op{
			{0, Acquire, 0, 0, 1, true, 3}, {0, Renew, 3, 2, 3, true, 0}, {1, Acquire, 0, 4, 5, false, 0},
			{0, Release, 3, 6, 7, true, 0}, {1, Acquire, 0, 8, 9, true, 7}, {0, Renew, 3, 10, 11, false, 0}}},
		{"a refusal concurrent with the grant linearizes after it", true, []op{
			{0, Acquire, 0, 0, 10, true, 1}, {1, Acquire, 0, 5, 15, false, 0}}},
		{"a grant concurrent with the release linearizes after it", true, []op{
			{0, Acquire, 0, 0, 1, true, 1}, {0, Release, 1, 2, 10, true, 0}, {1, Acquire, 0, 5, 15, true, 2}}},
		{"two live leases", false, []op{
			{0, Acquire, 0, 0, 1, true, 1}, {1, Acquire, 0, 2, 3, true, 2}}},
		{"a token that does not grow", false, []op{
			{0, Acquire, 0, 0, 1, true, 5}, {0, Release, 5, 2, 3, true, 0}, {1, Acquire, 0, 4, 5, true, 5}}},
		{"a free key refused (a stale read)", false, []op{
			{0, Acquire, 0, 0, 1, true, 1}, {0, Release, 1, 2, 3, true, 0}, {1, Acquire, 0, 4, 5, false, 0}}},
		{"a renew after the release", false, []op{
			{0, Acquire, 0, 0, 1, true, 1}, {0, Release, 1, 2, 3, true, 0}, {0, Renew, 1, 4, 5, true, 0}}},
		{"a second release of the same lease", false, []op{
			{0, Acquire, 0, 0, 1, true, 1}, {0, Release, 1, 2, 3, true, 0}, {0, Release, 1, 4, 5, true, 0}}},
		{"a live lease's renew refused", false, []op{
			{0, Acquire, 0, 0, 1, true, 1}, {0, Renew, 1, 2, 3, false, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := check(Model, c.ops...)
			if (err == nil) != c.ok {
				t.Fatalf("linearizable: %v, want %v (%v)", err == nil, c.ok, err)
			}
			if err != nil && !strings.Contains(err.Error(), "not linearizable") {
				t.Fatalf("error %q does not say the history is not linearizable", err)
			}
		})
	}
}

// Loose, for a store without fencing tokens, lets any acquire be refused and leaves tokens
// alone, but still refuses two live leases and a renew after the release.
func TestLoose(t *testing.T) {
	if err := check(Loose, op{0, Acquire, 0, 0, 1, true, 5}, op{0, Release, 5, 2, 3, true, 0},
		op{1, Acquire, 0, 4, 5, false, 0}, op{1, Acquire, 0, 6, 7, true, 2}); err != nil {
		t.Fatalf("a refusal of a free key and a smaller token, loosely: %v", err)
	}
	if err := check(Loose, op{0, Acquire, 0, 0, 1, true, 1}, op{1, Acquire, 0, 2, 3, true, 2}); err == nil {
		t.Fatal("two live leases passed the loose model")
	}
	if err := check(Loose, op{0, Acquire, 0, 0, 1, true, 1}, op{0, Release, 1, 2, 3, true, 0}, op{0, Renew, 1, 4, 5, true, 0}); err == nil {
		t.Fatal("a renew after the release passed the loose model")
	}
}
