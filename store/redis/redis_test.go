package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
	batonredis "github.com/batonhq/baton/store/redis"
	"github.com/batonhq/baton/store/storetest"
)

// hangGuard bounds a test's waits for a condition (a wake-up, a reconnect): only a hang reaches
// it, never a loaded machine.
const hangGuard = 3 * time.Minute

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func openSingle(t testing.TB, addr, prefix string) *batonredis.Store {
	t.Helper()
	s, err := batonredis.Open(testCtx(t), batonredis.Config{Addr: addr, KeyPrefix: prefix})
	if err != nil {
		t.Fatalf("Open(%s): %v", addr, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func delKey(t testing.TB, addr, k string) {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Del(testCtx(t), k).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	srv := startServer(t, false)
	storetest.Run(t, storetest.Harness{NewBackend: func(t testing.TB) storetest.Backend {
		prefix := newPrefix()
		return storetest.Backend{
			Open:      func(t testing.TB) store.Store { return openSingle(t, srv.addr(), prefix) },
			DeleteRow: func(t testing.TB, key string) { delKey(t, srv.addr(), prefix+"lease:"+key) },
		}
	}})
}

func acquire(ctx context.Context, s store.Store, key, id string) (*store.Lease, error) {
	return s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: id, TTL: time.Minute})
}

// acquireRetrying retries transport errors (the client reconnecting after a server restart).
func acquireRetrying(t *testing.T, s store.Store, key, id string) (*store.Lease, error) {
	t.Helper()
	ctx := testCtx(t)
	for i := 0; ; i++ {
		l, err := acquire(ctx, s, key, id)
		if err == nil || errors.Is(err, batonredis.ErrTokensReset) || errors.Is(err, store.ErrLockHeld) || i == 20 {
			return l, err
		}
		t.Logf("acquire after restart, attempt %d: %v", i, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// A restart without persistence wipes the token counter: the store must not hand out a token at
// or below one it has already handed out.
//
// This test switches the run_id check off (TrustServerChange) to exercise the counter check: the
// counter is below the highest token the store has seen.
func TestRestartWithoutPersistenceRefusesTokens(t *testing.T) {
	srv := startServer(t, false)
	s, err := batonredis.Open(testCtx(t), batonredis.Config{Addr: srv.addr(), TrustServerChange: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l1, err := acquire(testCtx(t), s, "k", "a")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := acquire(testCtx(t), s, "k2", "b")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before restart: tokens %d, %d", l1.Token, l2.Token)
	srv.restart()
	l3, err := acquireRetrying(t, s, "k3", "c")
	if err == nil {
		if l3.Token <= l2.Token {
			t.Fatalf("after a restart without persistence: token %d granted after %d", l3.Token, l2.Token)
		}
		t.Fatalf("after restart: granted token %d; expected ErrTokensReset", l3.Token)
	}
	if !errors.Is(err, batonredis.ErrTokensReset) {
		t.Fatalf("after restart: %v, want ErrTokensReset", err)
	}
	t.Logf("after restart: %v", err)
	// The way back: an operator raises the counter above every token ever issued.
	s2, err := batonredis.Open(testCtx(t), batonredis.Config{Addr: srv.addr(), TokenFloor: l2.Token + 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	l4, err := acquire(testCtx(t), s2, "k3", "c")
	if err != nil || l4.Token <= l2.Token+1000 {
		t.Fatalf("after re-seeding: %+v, %v", l4, err)
	}
	t.Logf("after re-seeding with floor %d: token %d", l2.Token+1000, l4.Token)
}

// With AOF and fsync on every write, a crash and restart keeps the counter and the lease.
func TestRestartWithPersistenceKeepsTokens(t *testing.T) {
	srv := startServer(t, true)
	s := openSingle(t, srv.addr(), "baton:")
	l1, err := acquire(testCtx(t), s, "k", "a")
	if err != nil {
		t.Fatal(err)
	}
	srv.restart()
	_, err = acquireRetrying(t, s, "k", "b")
	if !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("acquire of a held key after restart: %v, want ErrLockHeld (the grant was persisted)", err)
	}
	l2, err := acquireRetrying(t, s, "k2", "b")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token <= l1.Token {
		t.Fatalf("token %d after restart, not greater than %d", l2.Token, l1.Token)
	}
	// A store opened after the restart continues too.
	s2 := openSingle(t, srv.addr(), "baton:")
	l3, err := acquire(testCtx(t), s2, "k3", "c")
	if err != nil || l3.Token <= l2.Token {
		t.Fatalf("new store after restart: %+v, %v", l3, err)
	}
	t.Logf("tokens: %d before the crash, %d and %d after", l1.Token, l2.Token, l3.Token)
}

// After a restart without persistence, a store opened afterwards hands out tokens from 1 again
// and can push the counter past what an older store had seen; the older store must still refuse,
// because the server it knew was replaced (its run_id changed).
func TestRestartWithoutPersistenceOtherStoreRaisesCounter(t *testing.T) {
	srv := startServer(t, false)
	old := openSingle(t, srv.addr(), "baton:")
	l1, err := acquire(testCtx(t), old, "k", "a")
	if err != nil {
		t.Fatal(err)
	}
	srv.restart()
	fresh := openSingle(t, srv.addr(), "baton:")
	var last uint64
	for i := range 5 {
		l, err := acquire(testCtx(t), fresh, "f"+string(rune('0'+i)), "f")
		if err != nil {
			t.Fatal(err)
		}
		last = l.Token
	}
	if last <= l1.Token {
		t.Fatalf("the fresh store's counter %d did not pass %d: the test proves nothing", last, l1.Token)
	}
	_, err = acquireRetrying(t, old, "k2", "b")
	if !errors.Is(err, batonredis.ErrTokensReset) {
		t.Fatalf("old store after the server was replaced: %v, want ErrTokensReset", err)
	}
	t.Logf("token %d before the restart; a fresh store then issued 1..%d (duplicates); the old store: %v", l1.Token, last, err)
	if _, err := old.Get(testCtx(t), "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused grant was left behind: %v", err)
	}
}

// Acquire, renew and release are one script call each (after the scripts are loaded).
func TestOneRoundTripPerOperation(t *testing.T) {
	srv := startServer(t, false)
	s := openSingle(t, srv.addr(), "baton:")
	ctx := testCtx(t)
	cycle := func(id string) {
		t.Helper()
		if _, err := acquire(ctx, s, "k", id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: id, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: id}); err != nil {
			t.Fatal(err)
		}
	}
	cycle("warm-up") // loads the scripts (EVALSHA, NOSCRIPT, EVAL)
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cycle("measured")
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := func(cmd string) int {
		for _, line := range strings.Split(stats, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
				n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
				return n
			}
		}
		return 0
	}
	if n := calls("evalsha") + calls("eval"); n != 3 {
		t.Fatalf("acquire + renew + release made %d script calls, want 3:\n%s", n, stats)
	}
}
