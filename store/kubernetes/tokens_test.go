package kubernetes_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
)

// An operator deletes a key's Lease object: the holder's renewal fails with ErrNotHeld, and the
// next grant, on a new object, still gets a greater token (it starts from the API server's
// current resourceVersion).
func TestDeletedObjectTokensKeepIncreasing(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t, c)
	s := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: ns})
	var last uint64
	for i := range 3 {
		id := string(rune('a' + i))
		l, err := s.Acquire(ctx, &store.AcquireParams{Key: "deleted", LeaseID: id, Holder: "h", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if l.Token <= last {
			t.Fatalf("grant %d: token %d, not greater than %d", i, l.Token, last)
		}
		last = l.Token
		deleteLease(t, c, ns, "deleted")
		if _, err := s.Renew(ctx, &store.RenewParams{Key: "deleted", LeaseID: id, TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("renew after the object was deleted: %v, want ErrNotHeld", err)
		}
	}
}

// Lease objects that are not Baton's (client-go leader election keeps its own in the same
// namespaces) are not listed, and an object at a key's name that holds another key is refused
// with a clear error instead of being taken over.
func TestForeignObjects(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t, c)
	s := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: ns})
	leases := clientset(t, c.Config(kubetest.AdminToken)).CoordinationV1().Leases(ns)
	holder := "controller-0"
	if _, err := leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader-election"},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	impostor := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kubernetes.ObjectName("mine"),
		Labels:      map[string]string{kubernetes.LabelManagedBy: kubernetes.LabelValue},
		Annotations: map[string]string{"baton.batonhq.dev/key": "someone-else"}}}
	if _, err := leases.Create(ctx, impostor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "real", LeaseID: "r", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ls, err := s.List(ctx, &store.ListParams{})
	if err != nil || len(ls) != 1 || ls[0].Key != "real" {
		t.Fatalf("List = %v, %v; want only the Baton lease", ls, err)
	}
	_, err = s.Acquire(ctx, &store.AcquireParams{Key: "mine", LeaseID: "m", Holder: "h", TTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "someone-else") {
		t.Fatalf("Acquire on an object holding another key: %v, want an error naming it", err)
	}
}

func TestObjectName(t *testing.T) {
	keys := []string{"a", "A", "deploy/api", "deploy/API", "-", "日本", strings.Repeat("k", 512),
		strings.Repeat("é", 256), "cluster/prod-eu-1/scale", "..", "a--b"}
	seen := map[string]string{}
	for _, k := range keys {
		n := kubernetes.ObjectName(k)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("ObjectName(%q) = %q: %v", k, n, errs)
		}
		if n != kubernetes.ObjectName(k) {
			t.Errorf("ObjectName(%q) not stable", k)
		}
		if prev, ok := seen[n]; ok {
			t.Errorf("ObjectName(%q) = ObjectName(%q) = %q", k, prev, n)
		}
		seen[n] = k
	}
	if n := kubernetes.ObjectName("deploy/api"); !strings.HasPrefix(n, "baton-deploy-api-") {
		t.Errorf("ObjectName(deploy/api) = %q, want a readable prefix", n)
	}
}
