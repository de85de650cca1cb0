package kubernetes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
)

const annOwner = "baton.batonhq.dev/owner"

// A rolling upgrade: a Lease object written by an earlier version has no owner annotation and
// is served as owner "": its library holder renews, re-acquires and releases it as before, and
// an owner is refused. A grant without an owner writes no owner annotation, and one after an
// owned lease removes it.
func TestLeaseWithoutOwner(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := newNamespace(t, c)
	// As an earlier version wrote a grant (record.go's annotations without the owner).
	holder, secs := "h", int32(60)
	_, err := clientset(t, c.Config(kubetest.AdminToken)).CoordinationV1().Leases(ns).Create(ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetes.ObjectName("k"), Labels: map[string]string{kubernetes.LabelManagedBy: kubernetes.LabelValue},
			Annotations: map[string]string{"baton.batonhq.dev/key": "k", "baton.batonhq.dev/lease-id": "old-1",
				annState: "held", "baton.batonhq.dev/token": "7", "baton.batonhq.dev/ttl": "1m0s"}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: ns})
	got, err := s.Get(ctx, "k")
	if err != nil || got.ID != "old-1" || got.Owner != "" || got.Token != 7 {
		t.Fatalf("Get of a Lease without owner = %+v, %v", got, err)
	}
	var held *store.LockHeldError
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "h", Owner: "alice", TTL: time.Minute}); !errors.As(err, &held) {
		t.Fatalf("re-acquire by an owner: %v; want *LockHeldError", err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "old-1", Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew by an owner: %v; want ErrNotHeld", err)
	}
	if r, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "old-1", TTL: time.Minute}); err != nil || r.Owner != "" {
		t.Fatalf("renew by its holder = %+v, %v", r, err)
	}
	if r, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "old-2", Holder: "h", TTL: time.Minute}); err != nil || r.ID != "old-1" {
		t.Fatalf("re-acquire by its holder = %+v, %v; want lease old-1", r, err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "old-1"}); err != nil {
		t.Fatalf("release by its holder: %v", err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a-1", Holder: "h", Owner: "alice", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if o := getLease(t, c, ns, "k").Annotations[annOwner]; o != "alice" {
		t.Fatalf("owner annotation after alice's grant = %q", o)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "a-1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "lib-1", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if o, ok := getLease(t, c, ns, "k").Annotations[annOwner]; ok {
		t.Fatalf("a grant without owner after alice's lease left the owner annotation %q; want none, as earlier versions", o)
	}
}

// A renewal is first decided on the object this store last wrote, which may be stale: a lease
// ID that another store granted again to another owner must not be refused to that owner
// because the stale copy names the first one.
func TestOwnerOnStaleCachedObject(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := newNamespace(t, c)
	a := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: ns})
	b := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: ns})
	if _, err := a.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "id-1", Holder: "h", Owner: "alice", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "id-1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "id-1", Holder: "h", Owner: "bob", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "id-1", Owner: "bob", TTL: time.Minute}); err != nil || r.Owner != "bob" {
		t.Fatalf("bob's renewal through the store that granted alice the same ID = %+v, %v", r, err)
	}
	if _, err := a.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "id-1", Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("alice's renewal of bob's lease: %v; want ErrNotHeld", err)
	}
}
