package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
	batonredis "github.com/batonhq/baton/store/redis"
	"github.com/batonhq/baton/store/storetest"
)

// The same-work baseline: the least a lock cycle can ask of the server while keeping what
// Baton's Redis store promises (docs/guarantees.md), written by hand with nothing else:
//
//   - expiry on the server's clock: both scripts read TIME;
//   - the fencing token inside the grant: the grant INCRs a counter in the same script;
//   - a record of ended leases (AlreadyReleased, TookOver, cooldown and lock-delay after the
//     end): the key is one record (ID, token, expiry, state) that outlives the lease, so the
//     grant and the release both GET and SET it, and liveness is checked against TIME;
//   - one script per operation.
//
// That is TIME, GET, INCR, SET in the grant and TIME, GET, SET in the release: Baton's 7 calls in
// 2 scripts, with a 4-field MessagePack record and the fewest arguments (grant: 2 keys, ID and
// TTL; release: 1 key and the ID). Baton's scripts also carry the holder, acquisition time,
// metadata, cooldown, lock-delay, waiter mark and pause in the record, the earlier key layout's
// paths, Redlock's raise and the token floor.
var (
	sameWorkAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local raw = redis.call('GET', KEYS[1])
if raw then
  local id, tok, exp, st = cmsgpack.unpack(raw)
  if st == 0 and exp > now then
    return 0
  end
end
local ttl = tonumber(ARGV[2])
local tok = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], cmsgpack.pack(ARGV[1], tok, now + ttl, 0), 'PX', ttl + 3600000)
return tok
`)
	sameWorkRelease = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local raw = redis.call('GET', KEYS[1])
if not raw then
  return 0
end
local id, tok, exp, st = cmsgpack.unpack(raw)
if id ~= ARGV[1] then
  return 0
end
if st == 1 then
  return 1
end
if st ~= 0 or exp <= now then
  return 0
end
redis.call('SET', KEYS[1], cmsgpack.pack(id, tok, exp, 1), 'PX', 3600000)
return 2
`)
)

// redisSameWorkCycle runs the two same-work scripts; each cycle uses a new random lease ID of
// Baton's size (32 hex digits).
func redisSameWorkCycle(c *redis.Client) storetest.CycleFunc {
	ttl := strconv.FormatInt(benchTTL.Milliseconds(), 10)
	return func(ctx context.Context, key string) error {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		k := "samework:lease:" + key
		tok, err := sameWorkAcquire.Run(ctx, c, []string{k, "samework:token"}, id, ttl).Int64()
		if err != nil {
			return err
		}
		if tok == 0 {
			return fmt.Errorf("same-work grant refused %s", key)
		}
		r, err := sameWorkRelease.Run(ctx, c, []string{k}, id).Int64()
		if err != nil {
			return err
		}
		if r != 2 {
			return fmt.Errorf("same-work release of %s: %d", key, r)
		}
		return nil
	}
}

// batonStoreCycle is Baton's store alone, without the Locker (no lease object, keepalive or
// local deadline): Store.Acquire and Store.Release with the parameters TryAcquire passes by
// default, to tell the store's share of the cycle from the Locker's.
func batonStoreCycle(b *testing.B, addr string) storetest.CycleFunc {
	st, err := batonredis.Open(context.Background(), batonredis.Config{Addr: addr, KeyPrefix: "baton-store-bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return func(ctx context.Context, key string) error {
		var r [16]byte
		_, _ = rand.Read(r[:])
		id := hex.EncodeToString(r[:])
		if _, err := st.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "bench-holder:" + id[:12], TTL: benchTTL}); err != nil {
			return err
		}
		_, err := st.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: id})
		return err
	}
}
