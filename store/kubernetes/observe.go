package kubernetes

import (
	"strconv"
	"sync"
	"time"
)

// sightings remembers, per Lease object, the resourceVersion this store last saw and when it
// first saw it, on this process's monotonic clock. Expiry is decided from it alone, as client-go
// leader election does: a lease has expired for this store once the store has seen the same
// resourceVersion for the lease's TTL. Every sighting is taken after the write that produced it
// (a response or a watch event arrives after the write), so the wait ends at least a TTL, on
// this clock, after the holder's last grant or renewal was written. No two machines' clocks are
// compared; renewTime, written by the holder's clock, is never read.
//
// Forgetting a sighting is always safe: the next look starts a new observation, which only
// delays a takeover.
type sightings struct {
	mu sync.Mutex
	m  map[string]sighting
}

type sighting struct {
	rv    string
	first time.Time
}

// maxSightings bounds the map; beyond it, sightings older than the longest TTL plus the longest
// rest are dropped (they can no longer shorten any wait).
const maxSightings = 50000

// see records that object name had resourceVersion rv at time at (taken after the response or
// event arrived) and returns when this store first saw that resourceVersion. A sighting older
// than the one kept (a late watch event) changes nothing.
func (s *sightings) see(name, rv string, at time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]sighting{}
	}
	old, ok := s.m[name]
	if ok && old.rv == rv {
		// Concurrent calls read the clock before taking the lock: keep the earliest reading,
		// which is a sighting too, so that no caller sees a negative time unchanged.
		if at.Before(old.first) {
			old.first = at
			s.m[name] = old
		}
		return old.first
	}
	if ok && olderRV(rv, old.rv) {
		return at // a stale view: answer as if just seen, keep the newer sighting
	}
	if len(s.m) >= maxSightings {
		s.prune(at)
	}
	s.m[name] = sighting{rv: rv, first: at}
	return at
}

func (s *sightings) prune(now time.Time) {
	const horizon = 48 * time.Hour // MaxTTL + MaxRest
	for k, v := range s.m {
		if now.Sub(v.first) > horizon {
			delete(s.m, k)
		}
	}
}

// olderRV reports whether resourceVersion a is known to be older than b. resourceVersions are
// opaque to clients; kube-apiserver's are etcd revisions (decimal), compared as numbers when
// both parse, never otherwise.
func olderRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}
