package baton_test

//lint:file-ignore SA1019 the deprecated names are what this file tests

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// The names that the words of the API replaced keep working: user code written against them
// compiles, and errors.Is and errors.As match as before.
func TestDeprecatedNames(t *testing.T) {
	ctx := testCtx(t)
	st := openSQLite(t)
	locker, err := baton.NewLocker(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := locker.TryAcquire(ctx, "cool", baton.WithCooldown(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = locker.TryAcquire(ctx, "cool")
	var cool *baton.CooldownError
	if !errors.Is(err, baton.ErrCooldown) || !errors.Is(err, baton.ErrResting) || !errors.As(err, &cool) ||
		cool.Reason != "cooldown" {
		t.Fatalf("TryAcquire in a cooldown: %v; want ErrCooldown and a *CooldownError", err)
	}

	held, err := locker.TryAcquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	old, err := locker.List(ctx, baton.ListOptions{Prefix: "held", Limit: 1})
	if err != nil || len(old.Leases) != 1 || old.NextCursor != "held" {
		t.Fatalf("List = %+v, %v; want the lease and its key as NextCursor", old, err)
	}

	q := newQueue(t, st, baton.Kind{Name: "k", Policy: baton.PolicyReject})
	first := submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
	if jobs, err := q.List(ctx, baton.JobListParams{}); err != nil || len(jobs) != 1 || jobs[0].ID != first.ID {
		t.Fatalf("Queue.List = %v, %v", jobs, err)
	}
	if rs, err := q.Resources(ctx, baton.ResourceListParams{}); err != nil || len(rs) != 1 || rs[0].Key != "r" {
		t.Fatalf("Queue.Resources = %v, %v", rs, err)
	}
	_, err = q.SubmitMany(ctx, []baton.SubmitParams{{Kind: "k", Resource: "other"}, {Kind: "k", Resource: "r"}})
	var be *baton.BatchError
	if !errors.As(err, &be) || be.Index != 1 || baton.MaxSubmitBatch != baton.MaxSubmitMany {
		t.Fatalf("SubmitMany refused at job 1: %v; want a *BatchError at index 1", err)
	}
}
