package kubernetes_test

import (
	"context"
	"errors"
	"sync"
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
	wait := ttl + time.Duration(kubernetes.DefaultDriftFactor*float64(ttl)) // TTL plus drift
	if !errors.As(err, &held) || held.RetryAfter <= 0 || held.RetryAfter > wait {
		t.Fatalf("first look at the abandoned lease: %v, want held with 0 < RetryAfter <= %s", err, wait)
	}
	got, err := cl.Acquire(ctx, "abandoned", baton.WithHolder("contender"), baton.WithWaitTimeout(4*ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release(context.Background())
	took := time.Now()
	if d := took.Sub(firstLook); d < wait {
		t.Fatalf("contender took over %s after its first look, before the %s TTL plus drift", d, wait)
	}
	if !got.TookOver {
		t.Fatal("takeover of an abandoned lease not reported as TookOver")
	}
	t.Logf("taken over %s after the grant was sent, %s after the contender's first look",
		took.Sub(sent).Round(time.Millisecond), took.Sub(firstLook).Round(time.Millisecond))
}

// fakeClock is a clock the test moves by hand (with a monotonic reading: it is time.Now's,
// shifted).
type fakeClock struct {
	mu    sync.Mutex
	start time.Time
	off   time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(c.off)
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// A contender's clock may run faster than the holder's by up to the drift factor: it takes over
// only after it has seen the record unchanged for TTL × (1 + DriftFactor) on its own clock, not
// at the TTL (docs/design.md, "Time": "for the TTL (plus drift)"). Its clock is moved by hand here, so the
// test does not depend on timing.
func TestContenderWaitsTheDriftBeyondTheTTL(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := newNamespace(t, c)
	rc := c.Config(kubetest.AdminToken)
	clock := &fakeClock{start: time.Now()}
	holder := open(t, rc, kubernetes.Config{Namespace: ns})
	contender := open(t, rc, kubernetes.Config{Namespace: ns, Now: clock.now, DriftFactor: 0.1})
	const ttl = 10 * time.Second
	if _, err := holder.Acquire(ctx, &store.AcquireParams{Key: "drift", LeaseID: "h", Holder: "holder", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	try := func() (*store.Lease, error) {
		return contender.Acquire(ctx, &store.AcquireParams{Key: "drift", LeaseID: "c", Holder: "contender", TTL: ttl})
	}
	var held *store.LockHeldError
	near := func(d, want time.Duration) bool { return d > want-time.Millisecond && d < want+time.Millisecond }
	if _, err := try(); !errors.As(err, &held) || !near(held.RetryAfter, 11*time.Second) {
		t.Fatalf("first look: %v; want held, retry after TTL × 1.1 = 11s", err)
	}
	clock.advance(ttl + 500*time.Millisecond) // past the TTL, short of TTL × 1.1
	if _, err := try(); !errors.As(err, &held) || !near(held.RetryAfter, 500*time.Millisecond) {
		t.Fatalf("after the TTL: %v; want still held, retry after 500ms", err)
	}
	clock.advance(500 * time.Millisecond)
	l, err := try()
	if err != nil || !l.TookOver {
		t.Fatalf("after TTL × 1.1: %+v, %v; want taken over", l, err)
	}
}
