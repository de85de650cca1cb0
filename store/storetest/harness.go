// Package storetest is the conformance suite that every lease backend runs.
//
// A backend's test calls Run with a Harness; the suite exercises the store both directly and
// through baton.Locker, and checks the lease contract of docs/design.md with real concurrency.
// Cases a backend declares it cannot promise (see store.Capabilities) are skipped with "not
// applicable", never passed.
package storetest

import (
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Backend is one isolated database prepared for one test.
type Backend struct {
	// Open opens a store on this test's database. The suite calls it more than once in a test
	// (to check that tokens survive a close and reopen) and closes each store it opens.
	Open func(t testing.TB) store.Store
	// DeleteRow deletes the lease record of key behind the store's back, as an operator or a
	// bug might, so the suite can check that a holder notices.
	DeleteRow func(t testing.TB, key string)
}

// Harness tells the suite how to make backends.
type Harness struct {
	// NewBackend prepares an empty, isolated database for one test (a temporary file, a fresh
	// schema, a fresh key prefix) and removes it when the test ends.
	NewBackend func(t testing.TB) Backend
	// KeepaliveTTL is the TTL the keepalive cases hold their leases with; zero means one second.
	// A backend whose every write is a remote round trip that can take most of a second on a
	// loaded machine (an API server, a DynamoDB endpoint) sets more, so that the case tests
	// keepalive and not the machine's load: with a one-second TTL a renew gets only the 667 ms
	// between the first renew and the holder's local deadline.
	KeepaliveTTL time.Duration
}

func (h Harness) keepaliveTTL() time.Duration {
	if h.KeepaliveTTL > 0 {
		return h.KeepaliveTTL
	}
	return time.Second
}
