package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// TestPrefixRateStaleProcess: a store that read the rated prefixes before another process set one
// (its copy in memory is stale) still counts the rate: its plain acquire statement refuses a key
// under the rated prefix, whether the key has a row already or not, and it goes the way of holds;
// a job it submits on such a key is granted through holds too, and its claim counts.
func TestPrefixRateStaleProcess(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	ctx := testCtx(t)
	// b knew "sr/x" as a plain key before the rate.
	l, err := b.Acquire(ctx, acquireParams("sr/x", "early"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetPrefixRate(ctx, &store.SetPrefixRateParams{Prefix: "sr/", Rate: store.Rate{Max: 2, Window: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"sr/x", "sr/new"} {
		l, err := b.Acquire(ctx, acquireParams(k, "stale"))
		if err != nil {
			t.Fatalf("%s from the stale store under the rate: %v", k, err)
		}
		if _, err := b.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID}); err != nil {
			t.Fatal(err)
		}
	}
	var rest *store.RestingError
	if _, err := a.Acquire(ctx, acquireParams("sr/y", "third")); !errors.As(err, &rest) || rest.Reason != store.ReasonRate {
		t.Fatalf("a third grant under 2/1h, after two by the stale store: %v; want a rest for the rate", err)
	}
	// A process that knew no rate submits a job under the prefix: its claim is refused by the rate.
	if err := a.RegisterKinds(ctx, []store.Kind{{Name: "k"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeletePrefixRate(ctx, &store.DeletePrefixRateParams{Prefix: "sr/"}); err != nil {
		t.Fatal(err)
	}
	d := openStore(t, schema) // reads no rated prefix
	if _, err := a.SetPrefixRate(ctx, &store.SetPrefixRateParams{Prefix: "sr/", Rate: store.Rate{Max: 1, Window: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"sr/j1", "sr/j2"} {
		if _, err := d.SubmitJob(ctx, &store.SubmitParams{Kind: "k", Resource: r}); err != nil {
			t.Fatal(err)
		}
	}
	js, err := d.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"k"}, Limit: 10, TTL: time.Minute})
	if err != nil || len(js) != 1 {
		t.Fatalf("claims under 1/1h by a store that knew no rate: %d jobs, %v; want 1", len(js), err)
	}
	// Jobs queued before the rate was set: setting it makes them jobs with holds, which count.
	for _, r := range []string{"cv/1", "cv/2"} {
		if _, err := a.SubmitJob(ctx, &store.SubmitParams{Kind: "k", Resource: r}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.SetPrefixRate(ctx, &store.SetPrefixRateParams{Prefix: "cv/", Rate: store.Rate{Max: 1, Window: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	js, err = a.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"k"}, Limit: 10, TTL: time.Minute})
	if err != nil || len(js) != 1 {
		t.Fatalf("claims of jobs queued before the rate 1/1h was set: %d jobs, %v; want 1", len(js), err)
	}
}
