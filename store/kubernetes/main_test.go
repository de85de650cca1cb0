package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
	"github.com/batonhq/baton/store/storetest"
)

// shared is the API server most tests use (nil when the binaries are missing outside CI: then
// the tests that need it skip).
var (
	shared  *kubetest.Cluster
	assets  string
	missing error
)

func TestMain(m *testing.M) {
	assets, missing = kubetest.Assets()
	if missing != nil {
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "FATAL under CI:", missing)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "baton-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = kubetest.Start(assets, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	shared.Stop()
	os.RemoveAll(dir)
	if code == 0 && leakedWatch() {
		fmt.Fprintln(os.Stderr, "a Store's watch goroutine outlived its Close")
		code = 1
	}
	os.Exit(code)
}

// leakedWatch reports whether a Store's watch goroutine is still running (every store the
// tests open is closed by then). client-go's own goroutines (connection pools, klog) are not
// this package's to check.
func leakedWatch() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "store/kubernetes.(*Store).watch")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// cluster returns the shared API server or skips the test.
func cluster(t testing.TB) *kubetest.Cluster {
	t.Helper()
	if shared == nil {
		t.Skip(missing)
	}
	return shared
}

func clientset(t testing.TB, rc *rest.Config) *k8s.Clientset {
	t.Helper()
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

var namespaces atomic.Int64

// newNamespace creates a fresh namespace (as the admin) for one test's leases. Namespaces are
// not deleted: this API server runs no namespace controller to finish a deletion, and the
// server and its data go at the end of the run.
func newNamespace(t testing.TB, c *kubetest.Cluster) string {
	t.Helper()
	name := fmt.Sprintf("bt-%d", namespaces.Add(1))
	_, err := clientset(t, c.Config(kubetest.AdminToken)).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func open(t testing.TB, rc *rest.Config, cfg kubernetes.Config) *kubernetes.Store {
	t.Helper()
	s, err := kubernetes.Open(context.Background(), rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// harness gives each backend a fresh namespace; prepare runs on it (as the admin) before any
// store opens, and stores authenticate with token.
func harness(c *kubetest.Cluster, token string, prepare func(t testing.TB, ns string)) storetest.Harness {
	return storetest.Harness{KeepaliveTTL: keepaliveTTL, NewBackend: func(t testing.TB) storetest.Backend {
		ns := newNamespace(t, c)
		if prepare != nil {
			prepare(t, ns)
		}
		return storetest.Backend{
			Open: func(t testing.TB) store.Store { return open(t, c.Config(token), kubernetes.Config{Namespace: ns}) },
			DeleteRow: func(t testing.TB, key string) {
				deleteLease(t, c, ns, key)
			},
		}
	}}
}

// deleteLease deletes key's Lease object as an operator might.
func deleteLease(t testing.TB, c *kubetest.Cluster, ns, key string) {
	t.Helper()
	err := clientset(t, c.Config(kubetest.AdminToken)).CoordinationV1().Leases(ns).Delete(context.Background(),
		kubernetes.ObjectName(key), metav1.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// getLease reads key's Lease object as the admin.
func getLease(t testing.TB, c *kubetest.Cluster, ns, key string) *coordv1.Lease {
	t.Helper()
	l, err := clientset(t, c.Config(kubetest.AdminToken)).CoordinationV1().Leases(ns).Get(context.Background(),
		kubernetes.ObjectName(key), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The two conformance runs (this one and TestConformanceWithDocumentedRole) are not parallel
// with each other: on a loaded two-core machine under -race, both at once delay renewals of
// the 1 s TTL cases past their deadline. The other tests run alongside.
func TestConformance(t *testing.T) {
	c := cluster(t)
	storetest.Run(t, harness(c, kubetest.AdminToken, nil))
}

// keepaliveTTL is the TTL of the conformance suite's keepalive cases here. Every renew is an
// update through the API server to its etcd, both on this 2-core machine beside the rest of the
// test run; with a one-second TTL a renew gets 667 ms, which a loaded CI machine once missed.
// Operators run Kubernetes leases with TTLs of 15 s and more (client-go's leader election
// default), so three seconds still tests keepalive renewing many times over.
const keepaliveTTL = 3 * time.Second
