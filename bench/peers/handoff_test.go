// Package peers benchmarks Baton's Redis and etcd backends side by side with the libraries users
// would otherwise pick (go-redsync/redsync, bsm/redislock, etcd's concurrency.Mutex) and with the
// raw commands that do the minimum. It is a module of its own so that those libraries never
// enter Baton's dependencies. Every benchmark starts its own servers on ports of its own.
package peers

import "github.com/batonhq/baton/store/storetest"

// benchHandoff is the handoff measurement every lease benchmark uses (storetest.BenchHandoff).
var benchHandoff = storetest.BenchHandoffFunc
