package peers

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/batonhq/baton"
	batonkube "github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
	"github.com/batonhq/baton/store/storetest"
)

// startKube runs kube-apiserver and etcd (built by scripts/k8s-testenv.sh, named by
// BATON_K8S_ASSETS) on free loopback ports for one benchmark, and returns an admin client
// configuration and a fresh namespace.
func startKube(b *testing.B) (*rest.Config, string) {
	b.Helper()
	assets, err := kubetest.Assets()
	if err != nil {
		b.Skip(err)
	}
	c, err := kubetest.Start(assets, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Stop)
	klog.SetOutput(io.Discard) // leader election logs every transition
	klog.LogToStderr(false)
	rc := c.Config(kubetest.AdminToken)
	rc.QPS = -1 // no client-side rate limit for either side
	cs := kubeClient(b, rc)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return rc, "bench"
}

func kubeClient(b *testing.B, rc *rest.Config) *k8s.Clientset {
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

func batonKubeLocker(b *testing.B, rc *rest.Config, ns string) *baton.Locker {
	st, err := batonkube.Open(context.Background(), rc, batonkube.Config{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	l, err := baton.NewLocker(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

var identities atomic.Int64

// elect runs client-go leader election on the Lease name until it leads, with client-go's
// defaults (LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s) and ReleaseOnCancel, and
// returns the release: cancel, and wait until the elector has written the release.
func elect(ctx context.Context, cs *k8s.Clientset, ns, name string) (func(context.Context) error, error) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("elector-%d", identities.Add(1))},
	}
	leading := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { defer close(ended); le.Run(runCtx) }()
	select {
	case <-leading:
	case <-ended:
		cancel()
		return nil, ctx.Err()
	}
	return func(context.Context) error { cancel(); <-ended; return nil }, nil
}

// BenchmarkKubernetesCycle: uncontended acquire + release at 8 clients, each on a Lease of its
// own, Baton paired against client-go leader election (x-baseline = leader election's time /
// Baton's).
func BenchmarkKubernetesCycle(b *testing.B) {
	rc, ns := startKube(b)
	cs := kubeClient(b, rc)
	electCycle := func(ctx context.Context, key string) error {
		release, err := elect(ctx, cs, ns, "elect-"+strings.TrimPrefix(key, "bench/"))
		if err != nil {
			return err
		}
		return release(ctx)
	}
	storetest.BenchPaired(b, 8, electCycle, storetest.LockerCycle(batonKubeLocker(b, rc, ns)))
}

// BenchmarkKubernetesHandoff16: 16 waiters on one key, release to next acquire. Baton's
// waiters are woken by its watch; leader election's candidates poll every RetryPeriod.
func BenchmarkKubernetesHandoff16(b *testing.B) {
	rc, ns := startKube(b)
	b.Run("baton", func(b *testing.B) {
		storetest.BenchHandoff(b, batonKubeLocker(b, rc, ns), 16)
	})
	b.Run("leaderelection", func(b *testing.B) {
		cs := kubeClient(b, rc)
		benchHandoff(b, 16, func(ctx context.Context) (func(context.Context) error, error) {
			// A candidate (re-)enters one jittered RetryPeriod (2 s to 4.4 s, client-go's
			// JitterFactor 1.2) after it last tried, as one that keeps running its election loop
			// does; a fresh elector would try at once and the releaser would win its own lease
			// back, which is no handoff.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(2*time.Second + rand.N(2400*time.Millisecond)):
			}
			return elect(ctx, cs, ns, "handoff")
		})
	})
}
