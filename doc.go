// Package baton guarantees that only one job operates on a resource at a time.
//
// A Locker hands out leases: named, time-bounded, fenced locks kept alive in the background. A
// lease's Context is cancelled before the store could give the key to anyone else, so work done
// under it stops in time; its Token is a fencing token that strictly increases for each key, so
// the resource itself can reject a stale holder's late writes.
//
// A Locker works over any store.Store: store/sqlite (embedded, the default), store/postgres, and
// the backends of later modules. Every backend passes the conformance suite in store/storetest.
package baton
