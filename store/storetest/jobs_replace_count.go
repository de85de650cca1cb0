package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// RunJobSupersededCount checks store.SubmitResult.Superseded on a store that reports it (the
// HTTP client does not): a replace submit counts the queued jobs it ended, not a running job it
// asked to stop, nor anything when its idempotency key names a known job; in SubmitMany each
// result counts its own.
func RunJobSupersededCount(t *testing.T, s store.JobStore) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "count.rep", Policy: store.PolicyReplace}, {Name: "count.q"}}); err != nil {
		t.Fatal(err)
	}
	submit := func(p store.SubmitParams, want int) *store.Job {
		t.Helper()
		r, err := s.SubmitJob(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Superseded != want {
			t.Fatalf("SubmitJob(%s on %s, key %q): Superseded %d; want %d", p.Kind, p.Resource, p.IdempotencyKey, r.Superseded, want)
		}
		return r.Job
	}
	rep := func(resource string) store.SubmitParams {
		return store.SubmitParams{Kind: "count.rep", Resource: resource}
	}

	submit(rep("c/1"), 0)
	submit(store.SubmitParams{Kind: "count.q", Resource: "c/1"}, 0) // another kind: never superseded
	submit(rep("c/1"), 1)
	submit(store.SubmitParams{Kind: "count.q", Resource: "c/1", Policy: store.PolicyQueue}, 0)
	submit(store.SubmitParams{Kind: "count.rep", Resource: "c/1", Policy: store.PolicyQueue}, 0)
	submit(store.SubmitParams{Kind: "count.rep", Resource: "c/1", IdempotencyKey: "count-k"}, 2)
	submit(store.SubmitParams{Kind: "count.rep", Resource: "c/1", IdempotencyKey: "count-k"}, 0) // known key

	// A running job is asked to stop, not counted; the queued one behind it is.
	a := submit(rep("c/2"), 0)
	js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"count.rep"}, Limit: 10, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	claimed := false
	for _, j := range js {
		claimed = claimed || j.ID == a.ID
	}
	if !claimed {
		t.Fatalf("ClaimJobs = %v; want job %d among them", js, a.ID)
	}
	submit(rep("c/2"), 0)
	submit(rep("c/2"), 1)

	out, err := s.SubmitMany(ctx, []*store.SubmitParams{{Kind: "count.rep", Resource: "c/3"}, {Kind: "count.rep", Resource: "c/4"},
		{Kind: "count.rep", Resource: "c/3"}, {Kind: "count.rep", Resource: "c/3"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 0, 1, 1} {
		if out[i].Superseded != want {
			t.Fatalf("SubmitMany result %d: Superseded %d; want %d", i, out[i].Superseded, want)
		}
	}
}
