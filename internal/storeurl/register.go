package storeurl

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/batonhq/baton/store"
)

// Opener opens a store from the part of a store URL after "scheme://". It returns the store and a
// description of it that is safe to log (no password or secret). OpenLogged masks the URL's
// secrets (see redact) in that description and in the opener's errors as well, in case either
// quotes the URL.
type Opener func(ctx context.Context, rest string, log *slog.Logger) (st store.Store, name string, err error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes scheme:// open a store through open. Backends whose clients are too heavy for the
// core module (etcd, Kubernetes, DynamoDB) live in modules of their own and register their scheme
// from the binary that links them (cmd/baton-full). Registering a built-in or an already
// registered scheme panics: it is a programming error, found the first time the binary starts.
func Register(scheme string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, ok := builtin[scheme]; ok {
		panic(fmt.Sprintf("storeurl: scheme %q is built in", scheme))
	}
	if _, ok := registry[scheme]; ok {
		panic(fmt.Sprintf("storeurl: scheme %q registered twice", scheme))
	}
	registry[scheme] = open
}

var builtin = map[string]bool{"sqlite": true, "postgres": true, "postgresql": true, "redis": true, "rediss": true, "redis+redlock": true}

func registered(scheme string) (Opener, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	open, ok := registry[scheme]
	return open, ok
}

// schemes lists every scheme Open knows, for error messages.
func schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := []string{"sqlite", "postgres", "redis", "rediss", "redis+redlock"}
	extra := make([]string, 0, len(registry))
	for s := range registry {
		extra = append(extra, s)
	}
	sort.Strings(extra)
	return append(out, extra...)
}
