package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
	"github.com/batonhq/baton/store/storetest"
)

// docsRBAC reads the Role and RoleBinding of docs/kubernetes/rbac.yaml.
func docsRBAC(t testing.TB) (*rbacv1.Role, *rbacv1.RoleBinding) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(raw, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("docs/kubernetes/rbac.yaml: %d documents, want a Role and a RoleBinding", len(docs))
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	if err := yaml.UnmarshalStrict(docs[0], &role); err != nil || role.Kind != "Role" {
		t.Fatalf("docs Role: %v (%s)", err, role.Kind)
	}
	if err := yaml.UnmarshalStrict(docs[1], &binding); err != nil || binding.Kind != "RoleBinding" {
		t.Fatalf("docs RoleBinding: %v (%s)", err, binding.Kind)
	}
	return &role, &binding
}

// grantDocsRole applies the documented Role in ns and binds it to the limited test user
// instead of the documented ServiceAccount.
func grantDocsRole(t testing.TB, c *kubetest.Cluster, ns string) {
	t.Helper()
	role, binding := docsRBAC(t)
	role.Namespace, binding.Namespace = ns, ns
	binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kubetest.LimitedUser}}
	rbac := clientset(t, c.Config(kubetest.AdminToken)).RbacV1()
	ctx := context.Background()
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC is enforced from the API server's cache of Roles: wait until the user may list.
	limited := clientset(t, c.Config(kubetest.LimitedToken)).CoordinationV1().Leases(ns)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := limited.List(wctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return
		}
		if !apierrors.IsForbidden(err) || wctx.Err() != nil {
			t.Fatalf("limited user after the RoleBinding: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The whole conformance suite as a user whose only rights are the documented Role's.
func TestConformanceWithDocumentedRole(t *testing.T) {
	c := cluster(t)
	storetest.Run(t, harness(c, kubetest.LimitedToken, func(t testing.TB, ns string) { grantDocsRole(t, c, ns) }))
}

// The documented Role grants leases in its namespace and nothing else: not another namespace,
// not deleting Leases, not other resources.
func TestDocumentedRoleGrantsNothingElse(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx := context.Background()
	allowed, other := newNamespace(t, c), newNamespace(t, c)
	grantDocsRole(t, c, allowed)
	rc := c.Config(kubetest.LimitedToken)
	s := open(t, rc, kubernetes.Config{Namespace: allowed})
	l, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.Open(ctx, rc, kubernetes.Config{Namespace: other}); !apierrors.IsForbidden(errors.Unwrap(err)) {
		t.Fatalf("Open in a namespace without the Role: %v, want Forbidden", err)
	}
	cs := clientset(t, rc)
	if err := cs.CoordinationV1().Leases(allowed).Delete(ctx, kubernetes.ObjectName("k"), metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("delete a Lease with the documented Role: %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(allowed).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list ConfigMaps with the documented Role: %v, want Forbidden", err)
	}
	if got, err := s.Get(ctx, "k"); err != nil || got.Token != l.Token {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}
