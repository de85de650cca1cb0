// Package storeurl opens a lease store from a URL, for the baton command:
//
//	sqlite://./baton.db            a file relative to the working directory
//	sqlite:///var/lib/baton.db     an absolute path
//	sqlite://:memory:              in memory (tests)
//	postgres://user@host/db?…      PostgreSQL; an optional baton_schema=NAME query parameter
//	postgresql://…                 picks the schema (default "baton"); the rest goes to pgx
package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/sqlite"
)

// Open opens the store that raw names, with the audit log on (the server lists it). name is a
// description safe to log (no password).
func Open(ctx context.Context, raw string) (st store.Store, name string, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, "", fmt.Errorf("store URL %q: want scheme://…, e.g. sqlite://./baton.db or postgres://host/db", redact(raw))
	}
	switch scheme {
	case "sqlite":
		if rest == "" {
			return nil, "", fmt.Errorf("store URL %q: the SQLite path is empty", raw)
		}
		s, err := sqlite.Open(ctx, rest, sqlite.Config{Audit: true})
		if err != nil {
			return nil, "", err
		}
		return s, "sqlite:" + rest, nil
	case "postgres", "postgresql":
		u, err := url.Parse(raw)
		if err != nil {
			return nil, "", fmt.Errorf("store URL: %w", err)
		}
		q := u.Query()
		schema := q.Get("baton_schema")
		q.Del("baton_schema")
		u.RawQuery = q.Encode()
		s, err := postgres.Open(ctx, u.String(), postgres.Config{Schema: schema, Audit: true})
		if err != nil {
			return nil, "", fmt.Errorf("postgres store %s: %w", redact(raw), err)
		}
		return s, "postgres:" + u.Redacted(), nil
	default:
		return nil, "", fmt.Errorf("store URL %q: unknown scheme %q (sqlite, postgres)", redact(raw), scheme)
	}
}

// redact hides a password in a URL for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}
