package redis_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

func wantWake(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(hangGuard):
		t.Fatalf("no wake-up %s after %s (hung)", hangGuard, what)
	}
}

// The Pub/Sub connection is killed by the server: the listener reconnects, wakes every local
// waiter (a release may have been missed), and wake-ups from other processes flow again.
func TestPubSubReconnectWakesAll(t *testing.T) {
	srv := startServer(t, false)
	waiter := openSingle(t, srv.addr(), "baton:")
	holder := openSingle(t, srv.addr(), "baton:")
	ctx := testCtx(t)
	wake, cancel := waiter.Subscribe("k")
	defer cancel()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	wantWake(t, wake, "the Pub/Sub connection was killed")
	// The re-subscribed connection carries releases again. The release is retried until a
	// wake-up arrives: the re-subscription may not be in place at the first release. A release
	// publishes only if a waiting acquire was refused by the lease, so the waiter makes one.
	for i := 0; ; i++ {
		if _, err := acquire(ctx, holder, "k", "h"); err != nil {
			t.Fatal(err)
		}
		var held *store.LockHeldError
		if _, err := waiter.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "w", Holder: "w", TTL: time.Minute, Wait: true}); !errors.As(err, &held) {
			t.Fatalf("waiting acquire of a held key: %v, want LockHeldError", err)
		}
		if _, err := holder.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "h"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
			return
		case <-time.After(200 * time.Millisecond):
			if i == 50 {
				t.Fatal("no wake-up from another store's release after the reconnect")
			}
		}
	}
}

// With expiry events enabled on the server, a lease that simply expires wakes a waiter: the
// waiter's refused acquire marked the lease, which writes the wake key that expires with it (the
// lease key itself outlives the lease).
func TestExpiryEventWakes(t *testing.T) {
	srv := startServer(t, false, "--notify-keyspace-events", "Ex")
	s := openSingle(t, srv.addr(), "baton:")
	ctx := testCtx(t)
	wake, cancel := s.Subscribe("k")
	defer cancel()
	start := time.Now()
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "a", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "w", Holder: "w", TTL: time.Second, Wait: true}); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("waiting acquire while held: %v, want ErrLockHeld", err)
	}
	wantWake(t, wake, "the lease expired")
	if d := time.Since(start); d < time.Second {
		t.Fatalf("woken after %s, before the 1s TTL", d)
	}
	if _, err := acquire(ctx, s, "k", "b"); err != nil {
		t.Fatalf("acquire after the expiry wake-up: %v", err)
	}
}

// Glob characters in a List prefix match literally.
func TestListPrefixGlobCharacters(t *testing.T) {
	srv := startServer(t, false)
	s := openSingle(t, srv.addr(), "pre*fix:")
	ctx := testCtx(t)
	keys := []string{`x*/1`, `x?/2`, `x[/3`, `x]/4`, `x\/5`, `xa/6`, `x[a]/7`}
	for _, k := range keys {
		if _, err := acquire(ctx, s, k, "h-"+k); err != nil {
			t.Fatal(err)
		}
	}
	for prefix, want := range map[string][]string{
		`x*`: {`x*/1`}, `x?`: {`x?/2`}, `x[`: {`x[/3`, `x[a]/7`}, `x]`: {`x]/4`}, `x\`: {`x\/5`}, `x[a]`: {`x[a]/7`},
		`x`: {`x*/1`, `x?/2`, `x[/3`, `x[a]/7`, `x\/5`, `x]/4`, `xa/6`},
	} {
		ls, err := s.List(ctx, &store.ListParams{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range ls {
			got = append(got, l.Key)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List(prefix %q) = %q, want %q", prefix, got, want)
		}
	}
}
