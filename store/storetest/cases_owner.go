package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// A lease belongs to its owner (the principal a server authenticated): another owner cannot
// re-acquire it through the same holder string, renew it or release it, even with its ID, and
// none of those attempts changes it (a renewal of another owner that shortened the lease would
// let the key go while its holder still works).
func testOwnerKeepsLease(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().Owners, "the store takes no owner from its caller")
	const key = "owned"
	a, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "alice-1", Holder: "deployer", Owner: "alice", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if a.Owner != "alice" {
		t.Fatalf("Acquire returned owner %q, want alice", a.Owner)
	}
	// The expiry the store keeps, as Get reports it: on Redlock, Acquire's ExpiresAt is the
	// validity computed on the client, which Get (the nodes' expiry) never returns.
	first, err := e.store.Get(e.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(after string) {
		t.Helper()
		got, err := e.store.Get(e.ctx, key)
		// Every attempt below asks for a TTL of 1 s, so one that renewed the lease would bring
		// its expiry about a minute closer. Less than 2 s of difference is the store's estimate:
		// stores that keep no expiry instant compute it on each read (etcd's TimeToLive is whole
		// seconds; DynamoDB and Kubernetes add their drift to the TTL seen unchanged).
		if err != nil || got.ID != a.ID || got.Token != a.Token || got.Owner != "alice" || got.ExpiresAt.Sub(first.ExpiresAt).Abs() >= 2*time.Second {
			t.Fatalf("after %s: Get = %+v, %v; want alice's lease %s (token %d, owner alice, expiring %s) unchanged",
				after, got, err, a.ID, a.Token, first.ExpiresAt)
		}
	}
	// The same holder string under another owner: a conflict naming the holder, not the lease.
	l, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "bob-1", Holder: "deployer", Owner: "bob", TTL: time.Second})
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Holder != "deployer" {
		t.Fatalf("re-acquire by another owner = %+v, %v; want *LockHeldError naming holder deployer", l, err)
	}
	unchanged("a re-acquire by another owner")
	// A library caller (no owner) is another owner too.
	if _, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "anon-1", Holder: "deployer", TTL: time.Second}); !errors.As(err, &held) {
		t.Fatalf("re-acquire without an owner: %v; want *LockHeldError", err)
	}
	unchanged("a re-acquire without an owner")
	for _, owner := range []string{"bob", ""} {
		if l, err := e.store.Renew(e.ctx, &store.RenewParams{Key: key, LeaseID: a.ID, Owner: owner, TTL: time.Second}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("renew by owner %q = %+v, %v; want ErrNotHeld", owner, l, err)
		}
		unchanged(fmt.Sprintf("a renewal by owner %q", owner))
		res, err := store.RenewMany(e.ctx, e.store, []*store.RenewParams{{Key: key, LeaseID: a.ID, Owner: owner, TTL: time.Second}})
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, store.ErrNotHeld) {
			t.Fatalf("RenewMany by owner %q = %+v, %v; want ErrNotHeld for the lease", owner, res, err)
		}
		unchanged(fmt.Sprintf("RenewMany by owner %q", owner))
		if r, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: a.ID, Owner: owner}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("release by owner %q = %+v, %v; want ErrNotHeld", owner, r, err)
		}
		unchanged(fmt.Sprintf("a release by owner %q", owner))
	}
	// The owner itself: re-acquire (same lease), renew, list, release.
	b, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "alice-2", Holder: "deployer", Owner: "alice", TTL: time.Minute})
	if err != nil || b.ID != a.ID || b.Token != a.Token || b.Owner != "alice" {
		t.Fatalf("re-acquire by the owner = %+v, %v; want lease %s", b, err, a.ID)
	}
	if r, err := e.store.Renew(e.ctx, &store.RenewParams{Key: key, LeaseID: a.ID, Owner: "alice", TTL: time.Minute}); err != nil || r.Owner != "alice" {
		t.Fatalf("renew by the owner = %+v, %v", r, err)
	}
	res, err := store.RenewMany(e.ctx, e.store, []*store.RenewParams{{Key: key, LeaseID: a.ID, Owner: "alice", TTL: time.Minute}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("RenewMany by the owner = %+v, %v", res, err)
	}
	list, err := e.store.List(e.ctx, &store.ListParams{Prefix: key, Limit: 10})
	if err != nil || len(list) != 1 || list[0].Owner != "alice" {
		t.Fatalf("List = %+v, %v; want alice's lease with its owner", list, err)
	}
	if r, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: a.ID, Owner: "alice"}); err != nil || r.AlreadyReleased {
		t.Fatalf("release by the owner = %+v, %v", r, err)
	}
	// Once free, anyone may take the key, and the owner is the new one's.
	c, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "bob-2", Holder: "deployer", Owner: "bob", TTL: time.Minute})
	if err != nil || c.Owner != "bob" || c.ID != "bob-2" {
		t.Fatalf("acquire of the released key by bob = %+v, %v", c, err)
	}
	_, _ = e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: c.ID, Owner: "bob"})
	// Without owners, nothing changes: a library caller's lease is its holder's.
	d, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "unowned", LeaseID: "lib-1", Holder: "lib", TTL: time.Minute})
	if err != nil || d.Owner != "" {
		t.Fatalf("acquire without an owner = %+v, %v; want owner \"\"", d, err)
	}
	if again, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "unowned", LeaseID: "lib-2", Holder: "lib", TTL: time.Minute}); err != nil || again.ID != d.ID {
		t.Fatalf("re-acquire without an owner = %+v, %v; want lease %s", again, err, d.ID)
	}
	_, _ = e.store.Release(e.ctx, &store.ReleaseParams{Key: "unowned", LeaseID: d.ID})
	// A bad owner is refused before anything is written.
	_, err = e.store.Acquire(e.ctx, &store.AcquireParams{Key: "bad-owner", LeaseID: "x", Holder: "x", Owner: "a\x00b", TTL: time.Minute})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "owner" {
		t.Fatalf("acquire with a control character in the owner: %v; want invalid owner", err)
	}
	if _, err := e.store.Get(e.ctx, "bad-owner"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused acquire wrote the key: %v", err)
	}
}

// The audit log names the principal of each change apart from the holder string: the lease's
// owner for its grant, release and takeover, the admin for a force-release.
func testAuditPrincipal(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().Audit, "the store was opened without audit")
	requireNotApplicable(t, e.store.Capabilities().Owners, "the store takes no owner from its caller")
	const key = "audit-principal"
	a, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "p-1", Holder: "h", Owner: "alice", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: a.ID, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	b, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "p-2", Holder: "h", Owner: "bob", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ForceRelease(e.ctx, &store.ForceReleaseParams{Key: key, Reason: "stuck", Actor: "root", Principal: "root"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "p-3", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	events, err := e.store.Events(e.ctx, &store.EventsParams{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ kind, holder, actor, principal string }
	want := []row{
		{store.EventAcquire, "h", "h", "alice"},
		{store.EventRelease, "h", "h", "alice"},
		{store.EventAcquire, "h", "h", "bob"},
		{store.EventForceRelease, "h", "root", "root"},
		{store.EventAcquire, "h", "h", ""},
	}
	var got []row
	for _, ev := range events {
		got = append(got, row{ev.Kind, ev.Holder, ev.Actor, ev.Principal})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log of %q (kind, holder, actor, principal):\n got %v\nwant %v", key, got, want)
	}
	_ = b
}
