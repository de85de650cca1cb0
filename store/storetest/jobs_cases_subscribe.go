package storetest

import (
	"testing"

	"github.com/batonhq/baton/store"
)

// One subscription to several kinds is woken, on its one channel, by a job of any of them: a
// worker or a waiting claim of several kinds needs no channel per kind.
func testJobSubscribeKinds(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "kind-a"}, store.Kind{Name: "kind-b"})
	wake, cancel := e.s.SubscribeJobs("kind-a", "kind-b")
	defer cancel()
	woken := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-e.ctx.Done():
			t.Fatalf("no wake-up after %s", what)
		}
	}
	e.sub("kind-b", "r/b")
	woken("the submit of a job of the second kind")
	e.sub("kind-a", "r/a")
	woken("the submit of a job of the first kind")
	// Cancelling leaves every kind: a submit wakes nobody, and must not fail.
	cancel()
	e.sub("kind-b", "r/b2")
}
