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
// description of it to log. OpenLogged masks the URL's secrets (see redact) in that description
// and in the opener's errors, in case either quotes the URL: an opener parses its URLs and need
// not know every form of secret they may carry.
type Opener func(ctx context.Context, rest string, log *slog.Logger) (st store.Store, name string, err error)

var (
	registryMu sync.RWMutex
	registry   = builtinOpeners() // then what Register adds
)

// Register makes scheme:// open a store through open. Backends whose clients are too heavy for the
// core module (etcd, Kubernetes, DynamoDB) live in modules of their own and register their scheme
// from the binary that links them (cmd/baton-full). Registering a built-in or an already
// registered scheme panics: it is a programming error, found the first time the binary starts.
func Register(scheme string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if isBuiltin(scheme) {
		panic(fmt.Sprintf("storeurl: scheme %q is built in", scheme))
	}
	if _, ok := registry[scheme]; ok {
		panic(fmt.Sprintf("storeurl: scheme %q registered twice", scheme))
	}
	registry[scheme] = open
}

func registered(scheme string) (Opener, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	open, ok := registry[scheme]
	return open, ok
}

// schemes lists every scheme Open knows, for error messages: the built-ins in their order, then
// the registered ones sorted.
func schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var out, extra []string
	for _, b := range builtins {
		if b.listed {
			out = append(out, b.scheme)
		}
	}
	for s := range registry {
		if !isBuiltin(s) {
			extra = append(extra, s)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}
