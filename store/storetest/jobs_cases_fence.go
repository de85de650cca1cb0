package storetest

import (
	"errors"
	"testing"

	"github.com/batonhq/baton/store"
)

// testJobFenceTokens checks, for job stores that keep fences, that a job attempt's token is an
// issued token to the fence (attempts draw from the sequence leases draw from) and that the
// token after it, not yet drawn, is refused naming the field.
func testJobFenceTokens(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "fenced"})
	f, ok := e.s.(store.Fencer)
	if !ok {
		t.Skip("the store keeps no fences")
	}
	j := e.claimOne(e.sub("fenced", "fence/job").ID, "fenced")
	if got, err := f.CheckFence(e.ctx, "fence/job", j.Token); err != nil || got != j.Token {
		t.Fatalf("CheckFence(fence/job, %d) with the attempt's token = %d, %v; want it to pass", j.Token, got, err)
	}
	got, err := f.CheckFence(e.ctx, "fence/job", j.Token+1)
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "token" {
		t.Fatalf("CheckFence(fence/job, %d), a token not yet drawn = %d, %v; want an invalid token", j.Token+1, got, err)
	}
}
