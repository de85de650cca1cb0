package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
)

// The annotations a force-release and a cleared rest leave on the Lease object: this backend
// has no audit log, so they are the only record of who forced a key and why (guarantees.md).
const (
	annState     = "baton.batonhq.dev/state"
	annReason    = "baton.batonhq.dev/force-reason"
	annActor     = "baton.batonhq.dev/force-actor"
	annLockDelay = "baton.batonhq.dev/lock-delay"
)

// ForceRelease and ClearRest write the reason and actor onto the object (an empty actor as
// "unknown", as the stores with an audit log record it), ClearRest ends the lock-delay, and the
// next grant removes them. The store's clock is moved by hand for the expired-lease case.
func TestForceAndClearRestAnnotations(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := newNamespace(t, c)
	clock := &fakeClock{start: time.Now()}
	s := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: ns, Now: clock.now})
	acquire := func(key, id string) {
		t.Helper()
		if _, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "worker",
			TTL: 10 * time.Second, LockDelay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step, key, state, reason, actor string, lockDelay bool) {
		t.Helper()
		l := getLease(t, c, ns, key)
		a := l.Annotations
		if a[annState] != state || a[annReason] != reason || a[annActor] != actor {
			t.Fatalf("%s: state %q, force-reason %q, force-actor %q; want %q, %q, %q",
				step, a[annState], a[annReason], a[annActor], state, reason, actor)
		}
		if _, ok := a[annLockDelay]; ok != lockDelay {
			t.Fatalf("%s: lock-delay annotation %q present=%v, want present=%v", step, a[annLockDelay], ok, lockDelay)
		}
		if reason == "" {
			if _, ok := a[annReason]; ok {
				t.Fatalf("%s: force-reason annotation left on the object", step)
			}
			if _, ok := a[annActor]; ok {
				t.Fatalf("%s: force-actor annotation left on the object", step)
			}
		}
		if state != "held" && l.Spec.HolderIdentity != nil {
			t.Fatalf("%s: holderIdentity %q left on a %s Lease", step, *l.Spec.HolderIdentity, state)
		}
	}

	// Force-release with an actor, then clear the lock-delay it started by another admin.
	acquire("named", "n1")
	if _, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "named", Reason: "stuck job", Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	check("force-release by alice", "named", "forced", "stuck job", "alice", true)
	rest, err := s.ClearRest(ctx, &store.ClearRestParams{Key: "named", Reason: "maintenance over", Actor: "bob"})
	if err != nil || rest.Reason != store.ReasonLockDelay {
		t.Fatalf("ClearRest after a force-release: %+v, %v; want the lock-delay ended", rest, err)
	}
	check("clear-rest by bob", "named", "forced", "maintenance over", "bob", false)
	acquire("named", "n2")
	check("grant after the cleared rest", "named", "held", "", "", true)

	// Without an actor, both record "unknown".
	acquire("anonymous", "a1")
	if _, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "anonymous", Reason: "no actor"}); err != nil {
		t.Fatal(err)
	}
	check("force-release without an actor", "anonymous", "forced", "no actor", "unknown", true)
	if _, err := s.ClearRest(ctx, &store.ClearRestParams{Key: "anonymous", Reason: "cleared, no actor"}); err != nil {
		t.Fatal(err)
	}
	check("clear-rest without an actor", "anonymous", "forced", "cleared, no actor", "unknown", false)

	// A lease this store has seen expire, resting in its lock-delay: ClearRest turns the held
	// record into a forced one carrying the reason and actor.
	acquire("expired", "e1")
	clock.advance(time.Minute) // past the TTL plus drift, well inside the hour's lock-delay
	rest, err = s.ClearRest(ctx, &store.ClearRestParams{Key: "expired", Reason: "holder gone"})
	if err != nil || rest.Reason != store.ReasonLockDelay {
		t.Fatalf("ClearRest after an expiry: %+v, %v; want the lock-delay ended", rest, err)
	}
	check("clear-rest after an expiry", "expired", "forced", "holder gone", "unknown", false)
}
