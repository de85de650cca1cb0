package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/store/kubernetes"
	"github.com/batonhq/baton/store/kubernetes/kubetest"
	"github.com/batonhq/baton/store/storetest"
)

// Sixteen goroutines try-acquire and release one key back to back. Every attempt must answer
// granted or held: a try-acquire that keeps losing the race to write the Lease object (the key
// granted and released again between its read and its update) retries rather than failing with
// "too much contention", as it once did in the conformance suite's MutualExclusion on a loaded
// CI machine.
func TestTryAcquireUnderHeavyContention(t *testing.T) {
	c := cluster(t)
	s := open(t, c.Config(kubetest.AdminToken), kubernetes.Config{Namespace: newNamespace(t, c)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stats, err := storetest.CheckExclusionWithin(ctx, s, 16, 60, 1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Held == 0 {
		t.Fatalf("no attempt met the key held (%d grants): no contention", stats.Grants)
	}
	t.Logf("%d attempts: %d grants, %d found the key held", stats.Attempts, stats.Grants, stats.Held)
}
