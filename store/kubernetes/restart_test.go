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
	"github.com/batonhq/baton/store/storetest"
)

// The API server and etcd are killed and started again on their data: tokens keep
// increasing, a lease held across the restart is still held and renewable, and a store opened
// before the restart re-establishes its watch (a waiter with a one-minute poll is woken by a
// release after the restart).
func TestRestartKeepsLeasesAndTokens(t *testing.T) {
	cluster(t) // skips without the binaries
	t.Parallel()
	c, err := kubetest.Start(assets, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := newNamespace(t, c)
	rc := c.Config(kubetest.AdminToken)
	s := open(t, rc, kubernetes.Config{Namespace: ns})
	first, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "a"}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Acquire(ctx, &store.AcquireParams{Key: "kept", LeaseID: "b", Holder: "h", TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}

	after := open(t, rc, kubernetes.Config{Namespace: ns})
	second, err := after.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "c", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if second.Token <= first.Token {
		t.Fatalf("token after restart %d, not greater than %d before it", second.Token, first.Token)
	}
	got, err := after.Get(ctx, "kept")
	if err != nil || got.ID != "b" || got.Token != kept.Token {
		t.Fatalf("lease held across the restart: %+v, %v", got, err)
	}
	if _, err := after.Acquire(ctx, &store.AcquireParams{Key: "kept", LeaseID: "d", Holder: "other", TTL: time.Minute}); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("another holder after the restart: %v, want ErrLockHeld", err)
	}
	// The store from before the restart: its renewals work again (client-go reconnects) ...
	var renewErr error
	for range 100 {
		if _, renewErr = s.Renew(ctx, &store.RenewParams{Key: "kept", LeaseID: "b", TTL: 5 * time.Minute}); !isTransient(renewErr) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if renewErr != nil {
		t.Fatalf("renew after restart: %v", renewErr)
	}
	// ... and its watch wakes a waiter.
	signalled, refused := storetest.SignalRefusal(s)
	waiter, err := baton.NewLocker(signalled, &baton.Config{PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got2 := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "kept", baton.WithHolder("waiter"))
		if err == nil {
			_ = l.Release(context.Background())
		}
		got2 <- err
	}()
	select {
	case <-refused:
	case err := <-got2:
		t.Fatalf("waiter returned before the release: %v", err)
	}
	released := time.Now()
	if _, err := after.Release(ctx, &store.ReleaseParams{Key: "kept", LeaseID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got2; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if d := time.Since(released); d > 30*time.Second {
		t.Fatalf("waiter woke %s after the release: with a one-minute poll only the watch is faster", d)
	}
	t.Logf("tokens: %d before the restart, %d after; waiter woke %s after the release",
		first.Token, second.Token, time.Since(released).Round(time.Millisecond))
}

func isTransient(err error) bool {
	return err != nil && !errors.Is(err, store.ErrNotHeld) && !errors.Is(err, store.ErrClosed)
}
