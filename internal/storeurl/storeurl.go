// Package storeurl opens a lease store from a URL, for the baton command:
//
//	sqlite://./baton.db            a file relative to the working directory
//	sqlite:///var/lib/baton.db     an absolute path
//	sqlite://:memory:              in memory (tests)
//	postgres://user@host/db?…      PostgreSQL; an optional baton_schema=NAME query parameter
//	postgresql://…                 picks the schema (default "baton"), baton_max_conns=N the pool's
//	                               connections for statements (default max(8, 2 × GOMAXPROCS),
//	                               plus one for LISTEN); the rest goes to pgx
//	redis://[user:pass@]host:port/db?baton_prefix=P
//	rediss://…                     one Redis server (rediss: TLS); baton_prefix picks the key prefix
//	                               (default "baton:"), the rest goes to go-redis's ParseURL. A
//	                               server that does not persist every write (appendonly yes and
//	                               appendfsync always, read with CONFIG GET) is refused, because
//	                               after a restart it hands out fencing tokens that repeat earlier
//	                               ones, unless baton_allow_volatile=true accepts that (it is still
//	                               logged as a warning)
//	redis+redlock://[user:pass@]h1:p1,h2:p2,h3:p3?baton_prefix=P
//	                               Redlock over an odd number (>= 3) of independent servers; no
//	                               fencing tokens (see docs/guarantees.md)
//
// Backends in modules of their own register further schemes with Register (cmd/baton-full).
//
// The name Open returns and its errors never show a secret of the URL: passwords and
// secret-named parameters are replaced by xxxxx (redact.go).
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	batonredis "github.com/batonhq/baton/store/redis"
	"github.com/batonhq/baton/store/sqlite"
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
			return nil, "", fmt.Errorf("store URL %s: %w", redact(raw), errUnparsable)
		}
		q := u.Query()
		schema := q.Get("baton_schema")
		q.Del("baton_schema")
		cfg := postgres.Config{Schema: schema, Audit: true}
		if v := q.Get("baton_max_conns"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > postgres.MaxMaxConns {
				return nil, "", fmt.Errorf("store URL %s: baton_max_conns=%q: want a number of connections, 1 to %d", redact(raw), v, postgres.MaxMaxConns)
			}
			cfg.MaxConns = n
		}
		q.Del("baton_max_conns")
		u.RawQuery = q.Encode()
		s, err := postgres.Open(ctx, u.String(), cfg)
		if err != nil {
			return nil, "", fmt.Errorf("postgres store %s: %w", redact(raw), err)
		}
		return s, "postgres:" + redact(u.String()), nil
	case "redis", "rediss":
		u, err := url.Parse(raw)
		if err != nil {
			return nil, "", fmt.Errorf("store URL %s: %w", redact(raw), errUnparsable)
		}
		q := u.Query()
		prefix := q.Get("baton_prefix")
		q.Del("baton_prefix")
		allowVolatile := false
		if v := q.Get("baton_allow_volatile"); v != "" {
			if allowVolatile, err = strconv.ParseBool(v); err != nil {
				return nil, "", fmt.Errorf("store URL %s: baton_allow_volatile=%q: want true or false", redact(raw), v)
			}
		}
		q.Del("baton_allow_volatile")
		u.RawQuery = q.Encode()
		s, err := batonredis.Open(ctx, batonredis.Config{URL: u.String(), KeyPrefix: prefix, Logger: log})
		if err != nil {
			return nil, "", fmt.Errorf("redis store %s: %w", redact(raw), err)
		}
		if p := s.Persistence(); !p.Durable() && !allowVolatile {
			_ = s.Close()
			return nil, "", fmt.Errorf("redis store %s: refusing a server that cannot keep fencing tokens across a restart (%s): "+
				"restarted without its data, it lets stores opened afterwards hand out tokens that repeat earlier ones; "+
				"run Redis with appendonly yes and appendfsync always, or accept the risk with baton_allow_volatile=true in the store URL (docs/guarantees.md)",
				redact(u.String()), p)
		}
		return s, "redis:" + redact(u.String()), nil
	case "redis+redlock":
		cfg, name, err := redlockConfig(rest)
		if err != nil {
			return nil, "", fmt.Errorf("store URL %q: %w", redact(raw), err)
		}
		s, err := batonredis.OpenRedlock(ctx, cfg)
		if err != nil {
			return nil, "", fmt.Errorf("redlock store %s: %w", name, err)
		}
		return s, name, nil
	default:
		if open, ok := registered(scheme); ok {
			if log == nil {
				log = slog.Default()
			}
			// An opener of another module names its store itself: whatever of the URL it
			// quotes is masked here, once for every scheme.
			st, name, err := open(ctx, rest, log)
			return st, scrub(name, raw), err
		}
		return nil, "", fmt.Errorf("store URL %q: unknown scheme %q (%s)", redact(raw), scheme, strings.Join(schemes(), ", "))
	}
}

// redlockConfig parses "[user:pass@]h1:p1,h2:p2,...[?baton_prefix=P]" (the URL after the scheme).
// net/url cannot parse a host list, so it is split by hand.
func redlockConfig(rest string) (batonredis.RedlockConfig, string, error) {
	var cfg batonredis.RedlockConfig
	hosts, query, _ := strings.Cut(rest, "?")
	hosts = strings.TrimSuffix(hosts, "/")
	opts := &goredis.Options{}
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		info := hosts[:at]
		hosts = hosts[at+1:]
		user, pass, hasPass := strings.Cut(info, ":")
		var err error
		// The unescaping errors quote the bad escape, which may be part of the password.
		if opts.Username, err = url.PathUnescape(user); err != nil {
			return cfg, "", errors.New("user: invalid percent-encoding")
		}
		if hasPass {
			if opts.Password, err = url.PathUnescape(pass); err != nil {
				return cfg, "", errors.New("password: invalid percent-encoding")
			}
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" || !strings.Contains(h, ":") || strings.ContainsAny(h, "/@") {
			return cfg, "", fmt.Errorf("bad host %q: want host:port", h)
		}
		cfg.Addrs = append(cfg.Addrs, h)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return cfg, "", err
	}
	for k := range q {
		if k != "baton_prefix" {
			return cfg, "", fmt.Errorf("unknown parameter %q (baton_prefix)", k)
		}
	}
	cfg.KeyPrefix = q.Get("baton_prefix")
	cfg.Options = opts
	return cfg, "redis+redlock:" + strings.Join(cfg.Addrs, ","), nil
}
