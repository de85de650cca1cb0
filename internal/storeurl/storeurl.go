// Package storeurl opens a lease store from a URL, for the baton command. It is a registry: each
// backend parses its own URLs, and its opener is registered for its schemes, those of this
// module in builtin.go (so every baton binary opens them):
//
//	sqlite://PATH                  sqlite.OpenURL: ./baton.db, /var/lib/baton.db, :memory:
//	postgres://…, postgresql://…   postgres.URLOpener: PostgreSQL; baton_schema, baton_max_conns
//	redis://…, rediss://…          redis.URLOpener: one Redis server (rediss: TLS); baton_prefix,
//	                               baton_allow_volatile
//	redis+redlock://h1:p1,h2:p2,…  redis.OpenRedlockURL: Redlock over an odd number (>= 3) of
//	                               servers; no fencing tokens
//
// Backends in modules of their own register further schemes with Register from the binary that
// links them (cmd/baton-full: etcd, dynamodb, kubernetes).
//
// The name Open returns and its errors never show a secret of the URL: passwords and
// secret-named parameters are replaced by xxxxx (redact.go), whichever opener wrote them.
package storeurl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/batonhq/baton/store"
)

// Open opens the store that raw names, with the audit log on (the server lists it). name is a
// description safe to log (no password). Warnings about the store go to slog.Default().
func Open(ctx context.Context, raw string) (st store.Store, name string, err error) {
	return OpenLogged(ctx, raw, nil)
}

// OpenLogged is Open with the logger that receives warnings about the store (such as a Redis
// server without durable persistence); slog.Default() if nil.
//
// Neither name nor the message of err shows a secret of raw (see redact): the name is what GET
// /v1/info and the start-up log show, and a driver's error may quote the URL it was given.
func OpenLogged(ctx context.Context, raw string, log *slog.Logger) (st store.Store, name string, err error) {
	st, name, err = open(ctx, raw, log)
	if err != nil {
		return nil, "", scrubError(err, raw)
	}
	return st, name, nil
}

func open(ctx context.Context, raw string, log *slog.Logger) (st store.Store, name string, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, "", fmt.Errorf("store URL %q: want scheme://…, e.g. sqlite://./baton.db or postgres://host/db", redact(raw))
	}
	open, ok := registered(scheme)
	if !ok {
		return nil, "", fmt.Errorf("store URL %q: unknown scheme %q (%s)", redact(raw), scheme, strings.Join(schemes(), ", "))
	}
	if log == nil {
		log = slog.Default()
	}
	st, name, err = open(ctx, rest, log)
	return st, maskName(name, scheme, raw), err
}

// maskName hides the secrets of raw in the name an opener gave its store. A name that quotes the
// URL ("postgres:postgres://…") has it redacted, which hides exactly the secrets; in any other
// name, whatever of the URL it quotes is masked wherever it appears.
func maskName(name, scheme, raw string) string {
	if label, quoted, ok := strings.Cut(name, ":"); ok && strings.HasPrefix(quoted, scheme+"://") {
		return label + ":" + redact(quoted)
	}
	return scrub(name, raw)
}
