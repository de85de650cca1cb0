package kubernetes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
)

// A contender whose clock runs an hour ahead, against a holder whose clock runs an hour behind
// (so the renewTime it writes looks an hour stale): the contender neither takes over a lease
// that is being renewed, nor an abandoned one before it has itself watched it unchanged for the
// TTL. Comparing renewTime+TTL with its own clock would take over at once in both cases.
func TestClockSkewedContenderWaitsForTTL(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := newNamespace(t, c)
	rc := c.Config(kubetest.AdminToken)
	behind := func() time.Time { return time.Now().Add(-time.Hour) } // Add keeps the monotonic reading
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	holder := open(t, rc, kubernetes.Config{Namespace: ns, Now: behind})
	contender := open(t, rc, kubernetes.Config{Namespace: ns, Now: ahead})
	const ttl = 2 * time.Second

	// A holder that keeps renewing keeps the key for three TTLs and more.
	hl, err := baton.NewLocker(holder, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := hl.TryAcquire(ctx, "renewed", baton.WithTTL(ttl), baton.WithHolder("holder"))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Release(context.Background())
	if rt := getLease(t, c, ns, "renewed").Spec.RenewTime; rt == nil || time.Since(rt.Time) < 50*time.Minute {
		t.Fatalf("renewTime %v: the holder's clock is not an hour behind", rt)
	}
	cl, err := baton.NewLocker(contender, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Acquire(ctx, "renewed", baton.WithHolder("contender"), baton.WithWaitTimeout(3*ttl))
	var held *baton.LockHeldError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &held) || held.Holder != "holder" {
		t.Fatalf("contender against a renewed lease: %v, want a wait timeout naming the holder", err)
	}
	if kept.Err() != nil {
		t.Fatalf("holder lost its lease: %v", kept.Err())
	}

	// A holder that stops renewing (it crashed right after the grant).
	sent := time.Now()
	if _, err := holder.Acquire(ctx, &store.AcquireParams{Key: "abandoned", LeaseID: "crashed", Holder: "holder", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	firstLook := time.Now()
	_, err = contender.Acquire(ctx, &store.AcquireParams{Key: "abandoned", LeaseID: "early", Holder: "contender", TTL: ttl})
	if !errors.As(err, &held) || held.RetryAfter <= 0 || held.RetryAfter > ttl {
		t.Fatalf("first look at the abandoned lease: %v, want held with 0 < RetryAfter <= %s", err, ttl)
	}
	got, err := cl.Acquire(ctx, "abandoned", baton.WithHolder("contender"), baton.WithWaitTimeout(4*ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release(context.Background())
	took := time.Now()
	if d := took.Sub(firstLook); d < ttl {
		t.Fatalf("contender took over %s after its first look, before the %s TTL", d, ttl)
	}
	if !got.TookOver {
		t.Fatal("takeover of an abandoned lease not reported as TookOver")
	}
	t.Logf("taken over %s after the grant was sent, %s after the contender's first look",
		took.Sub(sent).Round(time.Millisecond), took.Sub(firstLook).Round(time.Millisecond))
}
