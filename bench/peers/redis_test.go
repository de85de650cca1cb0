package peers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	batonredis "github.com/batonhq/baton/store/redis"
	"github.com/batonhq/baton/store/storetest"
)

const benchTTL = 15 * time.Second

// compareAndDelete is the standard safe release: delete the key only if it still holds our token.
var compareAndDelete = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// rawCycle is the minimum: SET NX PX, then the compare-and-delete script.
func rawCycle(c *redis.Client) storetest.CycleFunc {
	return func(ctx context.Context, key string) error {
		ok, err := c.SetNX(ctx, "raw:"+key, "token", benchTTL).Result()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("raw SET NX refused %s", key)
		}
		return compareAndDelete.Run(ctx, c, []string{"raw:" + key}, "token").Err()
	}
}

func redsyncCycle(c *redis.Client) storetest.CycleFunc {
	rs := redsync.New(goredis.NewPool(c))
	return func(ctx context.Context, key string) error {
		m := rs.NewMutex("redsync:"+key, redsync.WithExpiry(benchTTL), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		_, err := m.UnlockContext(ctx)
		return err
	}
}

func redislockCycle(c *redis.Client) storetest.CycleFunc {
	l := redislock.New(c)
	return func(ctx context.Context, key string) error {
		lock, err := l.Obtain(ctx, "redislock:"+key, benchTTL, nil)
		if err != nil {
			return err
		}
		return lock.Release(ctx)
	}
}

// BenchmarkRedisCycle: uncontended acquire + release at 8 clients, each peer paired with the raw
// baseline in one benchmark (x-baseline = raw time / peer time).
func BenchmarkRedisCycle(b *testing.B) {
	addr := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	b.Cleanup(func() { c.Close() })
	raw := rawCycle(c)
	for _, p := range []struct {
		name  string
		cycle func(b *testing.B) storetest.CycleFunc
	}{
		{"baton", func(b *testing.B) storetest.CycleFunc { return storetest.LockerCycle(batonRedisLocker(b, addr)) }},
		{"redsync", func(*testing.B) storetest.CycleFunc { return redsyncCycle(c) }},
		{"redislock", func(*testing.B) storetest.CycleFunc { return redislockCycle(c) }},
		{"batonStore", func(b *testing.B) storetest.CycleFunc { return batonStoreCycle(b, addr) }},
		{"sameWork", func(*testing.B) storetest.CycleFunc { return redisSameWorkCycle(c) }},
		{"raw", func(*testing.B) storetest.CycleFunc { return raw }},
	} {
		b.Run(p.name+"/clients=8", func(b *testing.B) {
			storetest.BenchPaired(b, 8, raw, p.cycle(b))
		})
	}
}

// BenchmarkRedisHandoff16: 16 waiters on one key, release to next acquire.
func BenchmarkRedisHandoff16(b *testing.B) {
	addr := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32})
	b.Cleanup(func() { c.Close() })
	b.Run("baton", func(b *testing.B) {
		storetest.BenchHandoff(b, batonRedisLocker(b, addr), 16)
	})
	b.Run("redsync", func(b *testing.B) {
		rs := redsync.New(goredis.NewPool(c))
		benchHandoff(b, 16, func(ctx context.Context) (func(context.Context) error, error) {
			// redsync polls: its default retry delay is 50-250 ms; this is the tightest common
			// setting, a random 1-5 ms, with enough tries to outlast 15 waiters.
			m := rs.NewMutex("redsync:handoff", redsync.WithExpiry(benchTTL), redsync.WithTries(1<<20),
				redsync.WithRetryDelayFunc(func(int) time.Duration {
					return time.Millisecond + time.Duration(time.Now().UnixNano()%4)*time.Millisecond
				}))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
		})
	})
	b.Run("redislock", func(b *testing.B) {
		l := redislock.New(c)
		benchHandoff(b, 16, func(ctx context.Context) (func(context.Context) error, error) {
			for {
				lock, err := l.Obtain(ctx, "redislock:handoff", benchTTL, &redislock.Options{
					RetryStrategy: redislock.LinearBackoff(2 * time.Millisecond)})
				if errors.Is(err, redislock.ErrNotObtained) && ctx.Err() == nil {
					continue // its retry strategy gives up when ctx has no deadline; keep waiting
				}
				if err != nil {
					return nil, err
				}
				return lock.Release, nil
			}
		})
	})
}

// batonRedisLocker is a Locker over Baton's single-node Redis store, on its own key prefix.
func batonRedisLocker(b *testing.B, addr string) *baton.Locker {
	b.Helper()
	st, err := batonredis.Open(context.Background(), batonredis.Config{Addr: addr, KeyPrefix: "baton-bench:"})
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
