package dynamodb

import (
	"sync"
	"time"
)

// observations remembers, per key, the record version this store last saw and since when (on
// its monotonic clock). DynamoDB's conditions compare only with values the client sends, and
// the clients' wall clocks may disagree, so "expired" is decided here: a record version seen
// unchanged for its TTL is expired. The holder wrote it before this store first saw it, and the
// holder stops trusting it at start_of_request + TTL*(1-DriftFactor) - SafetyMargin on its own
// clock (package baton), so it has stopped before this store, whose clock may run slower by up
// to the drift factor, counts the TTL from a later instant. A store that first sees a record
// late (a new process) only waits longer, never less.
type observations struct {
	mu sync.Mutex
	m  map[string]observation
}

type observation struct {
	rvn   string
	since time.Time
	busy  bool // a grant without reading would be refused: held, or resting after a tombstone
}

// maxObservations bounds the map; past it, it is emptied, which only makes this store wait a
// full TTL again before taking over a key it had been watching.
const maxObservations = 100_000

// see records that rvn was the record version of key at instant at (busy: whether a grant
// without reading would be refused on it), and returns for how long this store has seen that
// version unchanged.
func (o *observations) see(key, rvn string, busy bool, at time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ob, ok := o.m[key]; ok && ob.rvn == rvn {
		return max(at.Sub(ob.since), 0)
	}
	if o.m == nil || len(o.m) >= maxObservations {
		o.m = make(map[string]observation)
	}
	o.m[key] = observation{rvn: rvn, since: at, busy: busy}
	return 0
}

// busy reports whether the version of key last seen would refuse a grant made without reading:
// Acquire then reads first, and a waiter's poll costs one read instead of a refused write (which
// DynamoDB bills as a write) and a read. A stale answer costs a request, never a wrong decision.
func (o *observations) busy(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[key].busy
}

// forget drops what was seen of key (its item is gone).
func (o *observations) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}
