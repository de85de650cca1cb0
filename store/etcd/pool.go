package etcd

import (
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reuse of etcd leases. A Baton lease needs an etcd lease of its own (its TTL, its expiry when
// the holder dies, force-release), but granting one per acquire and revoking it per release
// doubled the raft rounds of a lock cycle. An etcd lease whose only key was deleted by this
// store's own guarded Txn (a release, a force-release) carries no key and nobody else knows it
// is free, so the store keeps it and attaches the next grant of the same TTL to it, after a
// keepalive that restarts its TTL (a leader-only call, not a raft round). Leases are never
// shared: one key at most is attached to one etcd lease at a time, so a lease's expiry still
// ends exactly one Baton lease, and nothing revokes a pooled lease.

// poolMax bounds the idle leases kept per TTL; more are dropped and expire on their own.
const poolMax = 1024

// pooled is an idle etcd lease with no key attached.
type pooled struct {
	id clientv3.LeaseID
	// alive is a lower bound of its expiry on this process's monotonic clock: the moment the
	// request that last restarted its TTL was sent, plus the TTL.
	alive time.Time
}

// leasePool holds idle etcd leases by granted TTL in seconds.
type leasePool struct {
	mu   sync.Mutex
	free map[int64][]pooled
}

// get returns the idle lease of ttl seconds that was used last, if one has at least minLeft
// to live; older ones are dropped (they expire on their own).
func (p *leasePool) get(ttl int64, minLeft time.Duration) (pooled, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	free := p.free[ttl]
	for len(free) > 0 {
		l := free[len(free)-1]
		free = free[:len(free)-1]
		if time.Until(l.alive) >= minLeft {
			p.free[ttl] = free
			return l, true
		}
	}
	if p.free != nil {
		delete(p.free, ttl)
	}
	return pooled{}, false
}

// put keeps an idle lease of ttl seconds.
func (p *leasePool) put(ttl int64, l pooled) {
	if l.id == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free == nil {
		p.free = map[int64][]pooled{}
	}
	if len(p.free[ttl]) < poolMax {
		p.free[ttl] = append(p.free[ttl], l)
	}
}

// minLeft is how long a pooled lease of ttl seconds must still live to be used: the grant's Txn
// must reach etcd before it expires (its TTL is restarted alongside).
func minLeft(ttl int64) time.Duration {
	return max(time.Second, time.Duration(ttl)*time.Second/2)
}

// heldLease is what this process knows of a lease it granted: enough to release it with one
// guarded Txn and to put its etcd lease back into the pool.
type heldLease struct {
	leaseID string
	rev     int64 // CreateRevision of the lease key: this grant
	etcd    pooled
	ttl     int64
	rec     *record
}

// heldMax bounds the cache of held leases; past it the cache is emptied (releases then take
// the slow path, which reads the key first).
const heldMax = 100_000

type heldCache struct {
	mu sync.Mutex
	m  map[string]*heldLease // by key
}

func (c *heldCache) set(key string, h *heldLease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= heldMax {
		c.m = map[string]*heldLease{}
	}
	c.m[key] = h
}

func (c *heldCache) get(key string) *heldLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// take removes and returns the entry of key if it is lease leaseID's, granted to owner. An entry
// of another owner stays: the caller then reads the key, which refuses it.
func (c *heldCache) take(key, leaseID, owner string) *heldLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.m[key]
	if h == nil || h.leaseID != leaseID || h.rec.Owner != owner {
		return nil
	}
	delete(c.m, key)
	return h
}

func (c *heldCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
