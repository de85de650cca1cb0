package storetest

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/store"
)

// testFences checks store.Fencer, for stores that keep fences: equal tokens pass, a lower one
// is refused with the greater stored one, resources are fenced apart, concurrent checks with
// tokens in random order leave the greatest, fences survive a reopen, and bad input is refused
// naming the field.
func testFences(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	f, ok := e.store.(store.Fencer)
	if !ok {
		t.Skip("the store keeps no fences")
	}
	ctx := e.ctx
	check := func(resource string, token, want uint64) {
		t.Helper()
		got, err := f.CheckFence(ctx, resource, token)
		if err != nil || got != want {
			t.Fatalf("CheckFence(%q, %d) = %d, %v; want %d", resource, token, got, err, want)
		}
	}
	check("fence/a", 5, 5)
	check("fence/a", 5, 5) // the same holder twice
	check("fence/a", 4, 5) // a paused holder
	check("fence/b", 1, 1) // another resource
	check("fence/a", 6, 6)

	const n = 40
	tokens := rand.Perm(n)
	got := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = f.CheckFence(ctx, "fence/c", uint64(tokens[i]+1)) })
	}
	wg.Wait()
	for i := range n {
		if tok := uint64(tokens[i] + 1); errs[i] != nil || got[i] < tok {
			t.Errorf("concurrent CheckFence(%d) = %d, %v; want at least the token", tok, got[i], errs[i])
		}
	}
	check("fence/c", 1, n)

	reopened, ok := e.backend.Open(t).(store.Fencer)
	if !ok {
		t.Fatal("a reopened store keeps no fences")
	}
	if got, err := reopened.CheckFence(ctx, "fence/a", 5); err != nil || got != 6 {
		t.Errorf("after a reopen, CheckFence(fence/a, 5) = %d, %v; want 6", got, err)
	}

	for _, c := range []struct {
		resource string
		token    uint64
		field    string
	}{
		{"", 1, "resource"},
		{strings.Repeat("r", store.MaxKeyLen+1), 1, "resource"},
		{"a\x00b", 1, "resource"},
		{"fence/a", 0, "token"},
		{"fence/a", store.MaxFenceToken + 1, "token"},
	} {
		_, err := f.CheckFence(ctx, c.resource, c.token)
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("CheckFence(%.12q, %d) = %v, want an invalid %s", c.resource, c.token, err, c.field)
		}
	}
}
