package baton_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
)

// Acquire a lease, do the work under its context, pass the fencing token to the resource, and
// release.
func Example() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, ":memory:", sqlite.Config{}) // a file path in real use
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	locker, err := baton.NewLocker(st, nil)
	if err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Acquire(ctx, "terraform/prod", baton.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	// lease.Context() is cancelled if the lease is lost; the token lets the resource refuse
	// writes from a holder that was too slow to notice.
	fmt.Println("holding", lease.Key, "with token", lease.Token, "alive:", lease.Context().Err() == nil)
	// Output: holding terraform/prod with token 1 alive: true
}

// WithLock runs a function under a lease; its context ends if the lease is lost.
func ExampleLocker_WithLock() {
	ctx := context.Background()
	st, _ := sqlite.Open(ctx, ":memory:", sqlite.Config{})
	defer st.Close()
	locker, _ := baton.NewLocker(st, nil)

	err := locker.WithLock(ctx, "cluster/c-42", func(ctx context.Context) error {
		fmt.Println("destroying cluster c-42")
		return ctx.Err()
	})
	fmt.Println("done:", err)
	// Output:
	// destroying cluster c-42
	// done: <nil>
}

// TryAcquire never waits; a conflict says who holds the key and until when.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	st, _ := sqlite.Open(ctx, ":memory:", sqlite.Config{})
	defer st.Close()
	locker, _ := baton.NewLocker(st, nil)

	first, _ := locker.TryAcquire(ctx, "deploy/api", baton.WithHolder("job-7"))
	defer first.Release(ctx)

	_, err := locker.TryAcquire(ctx, "deploy/api", baton.WithHolder("job-8"))
	var held *baton.LockHeldError
	if errors.As(err, &held) {
		fmt.Printf("held by %s (token %d), retry in under %s\n", held.Holder, held.Token, baton.DefaultTTL)
	}
	// Output: held by job-7 (token 1), retry in under 15s
}

// A cooldown keeps a key resting after a clean release, for instance between two remediations
// of one workload.
func ExampleWithCooldown() {
	ctx := context.Background()
	st, _ := sqlite.Open(ctx, ":memory:", sqlite.Config{})
	defer st.Close()
	locker, _ := baton.NewLocker(st, nil)

	lease, _ := locker.TryAcquire(ctx, "remediate/web", baton.WithCooldown(time.Minute))
	_ = lease.Release(ctx)

	_, err := locker.TryAcquire(ctx, "remediate/web")
	var rest *baton.RestingError
	if errors.As(err, &rest) {
		fmt.Println("resting:", rest.Reason, rest.Remaining > 59*time.Second)
	}
	// Output: resting: cooldown true
}
