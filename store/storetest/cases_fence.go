package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton"
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
	const n = 40
	if issued := e.issueTokens(n); issued < n {
		t.Fatalf("%d grants drew tokens up to %d", n, issued)
	}
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

// issueTokens draws n fencing tokens from the store, by granting and releasing a lease n times,
// and returns the last (the greatest): fences refuse tokens the store never issued.
func (e *env) issueTokens(n int) uint64 {
	e.t.Helper()
	var last uint64
	for range n {
		l, err := e.locker.TryAcquire(e.ctx, "fence/issuer", baton.WithKeepalive(false))
		if err != nil {
			e.t.Fatalf("TryAcquire(fence/issuer): %v", err)
		}
		last = l.Token
		if err := l.Release(e.ctx); err != nil {
			e.t.Fatalf("release fence/issuer: %v", err)
		}
	}
	return last
}

// testFenceUnissuedTokens checks that a fence refuses a token greater than every token the
// store has drawn (it belongs to no holder, and once stored it would refuse every real holder
// of the resource), naming the field and leaving the fence as it was; and that a token drawn
// for a lease passes as soon as its holder has it, also while other grants draw tokens at the
// same time (job attempts: testJobFenceTokens).
func testFenceUnissuedTokens(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	f, ok := e.store.(store.Fencer)
	if !ok {
		t.Skip("the store keeps no fences")
	}
	ctx := e.ctx
	refused := func(resource string, token uint64) {
		t.Helper()
		got, err := f.CheckFence(ctx, resource, token)
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != "token" || !strings.Contains(inv.Rule, "greatest token this store has issued") {
			t.Fatalf("CheckFence(%q, %d) = %d, %v; want an invalid token, above the greatest issued", resource, token, got, err)
		}
	}
	passes := func(resource string, token uint64) {
		t.Helper()
		if got, err := f.CheckFence(ctx, resource, token); err != nil || got != token {
			t.Fatalf("CheckFence(%q, %d) = %d, %v; want it to pass", resource, token, got, err)
		}
	}
	refused("fence/poison", 1) // nothing issued yet
	l := e.acquire("fence/poison", baton.WithKeepalive(false))
	refused("fence/poison", l.Token+1)
	refused("fence/poison", store.MaxFenceToken)
	passes("fence/poison", l.Token) // the refusals stored nothing
	next := e.acquire("fence/other", baton.WithKeepalive(false))
	passes("fence/poison", next.Token) // a later grant's token is issued

	// Holders check their token as soon as they have it while others are being granted.
	const holders = 16
	errs := make([]error, holders)
	var wg sync.WaitGroup
	for i := range holders {
		wg.Go(func() {
			key := fmt.Sprintf("fence/race/%d", i)
			l, err := e.locker.TryAcquire(ctx, key, baton.WithKeepalive(false))
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = l.Release(ctx) }()
			if got, err := f.CheckFence(ctx, key, l.Token); err != nil || got != l.Token {
				errs[i] = fmt.Errorf("CheckFence(%q, %d) just after the grant = %d, %v", key, l.Token, got, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// testFenceReset checks ResetFence: it deletes one resource's fence (the next check accepts any
// issued token) and returns the token it held; a resource without a fence is ErrNotFound; bad
// input names the field and deletes nothing; a store with an audit log records each reset
// (resource, token before, actor, reason).
func testFenceReset(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	f, ok := e.store.(store.Fencer)
	if !ok {
		t.Skip("the store keeps no fences")
	}
	ctx := e.ctx
	issued := e.issueTokens(3)
	check := func(resource string, token, want uint64) {
		t.Helper()
		got, err := f.CheckFence(ctx, resource, token)
		if err != nil || got != want {
			t.Fatalf("CheckFence(%q, %d) = %d, %v; want %d", resource, token, got, err, want)
		}
	}
	reset := func(resource, reason string) (uint64, error) {
		return f.ResetFence(ctx, &store.ResetFenceParams{Resource: resource, Reason: reason, Actor: "ops", Principal: "ops"})
	}
	if got, err := reset("fence/reset", "nothing to reset"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResetFence of a resource without a fence = %d, %v; want ErrNotFound", got, err)
	}
	check("fence/reset", issued, issued)
	check("fence/reset", issued-1, issued) // stale
	check("fence/kept", issued, issued)

	for _, c := range []struct {
		p     store.ResetFenceParams
		field string
	}{
		{store.ResetFenceParams{Reason: "r"}, "resource"},
		{store.ResetFenceParams{Resource: "a\x00b", Reason: "r"}, "resource"},
		{store.ResetFenceParams{Resource: "fence/reset"}, "reason"},
		{store.ResetFenceParams{Resource: "fence/reset", Reason: strings.Repeat("r", store.MaxReasonLen+1)}, "reason"},
		{store.ResetFenceParams{Resource: "fence/reset", Reason: "r", Actor: strings.Repeat("a", store.MaxHolderLen+1)}, "actor"},
		{store.ResetFenceParams{Resource: "fence/reset", Reason: "r", Principal: "a\x00"}, "principal"},
	} {
		_, err := f.ResetFence(ctx, &c.p)
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("ResetFence(%+.20v) = %v, want an invalid %s", c.p, err, c.field)
		}
	}
	check("fence/reset", issued-1, issued) // the refused resets deleted nothing

	if got, err := reset("fence/reset", "fenced by a token of the old store"); err != nil || got != issued {
		t.Fatalf("ResetFence(fence/reset) = %d, %v; want the fence's token %d", got, err, issued)
	}
	check("fence/reset", issued-1, issued-1) // any issued token passes again
	check("fence/kept", issued-1, issued)    // another resource's fence stays
	if got, err := reset("fence/reset", "again"); err != nil || got != issued-1 {
		t.Fatalf("second ResetFence(fence/reset) = %d, %v; want %d", got, err, issued-1)
	}
	if got, err := reset("fence/reset", "once more"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResetFence of a fence already reset = %d, %v; want ErrNotFound", got, err)
	}

	if !e.store.Capabilities().Audit {
		return
	}
	events, err := e.store.Events(ctx, &store.EventsParams{Key: "fence/reset"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		kind, actor, principal, reason string
		token                          uint64
	}
	// The principal is the caller's word to a store; the HTTP client's server sets it from the
	// token instead (none without auth).
	principal := ""
	if e.store.Capabilities().Owners {
		principal = "ops"
	}
	var got []row
	for _, ev := range events {
		got = append(got, row{ev.Kind, ev.Actor, ev.Principal, ev.Reason, ev.Token})
		if ev.At.IsZero() || ev.LeaseID != "" {
			t.Errorf("event %+v: want a time and no lease ID", ev)
		}
	}
	want := []row{
		{store.EventFenceReset, "ops", principal, "fenced by a token of the old store", issued},
		{store.EventFenceReset, "ops", principal, "again", issued - 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log of fence/reset:\n got %v\nwant %v", got, want)
	}
}
