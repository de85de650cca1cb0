package redis

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
)

// URLOpener returns the opener of store URLs of scheme (redis, or rediss for TLS), for the part
// of the URL after "scheme://":
//
//	[user:pass@]host:port/db[?baton_prefix=P&baton_allow_volatile=true&…]
//
// baton_prefix picks the key prefix (default DefaultKeyPrefix); the rest of the URL goes to
// go-redis's ParseURL. A server that does not persist every write (appendonly yes and
// appendfsync always, read with CONFIG GET) is refused, because after a restart it hands out
// fencing tokens that repeat earlier ones, unless baton_allow_volatile=true accepts that (Open
// still logs it as a warning, to log). It is the opener internal/storeurl registers for both
// schemes.
//
// name shows the URL without its password. The errors may quote the URL, secrets included:
// storeurl masks them, as it does for every opener.
func URLOpener(scheme string) func(ctx context.Context, rest string, log *slog.Logger) (store.Store, string, error) {
	return func(ctx context.Context, rest string, log *slog.Logger) (store.Store, string, error) {
		return openURL(ctx, scheme+"://"+rest, log)
	}
}

func openURL(ctx context.Context, raw string, log *slog.Logger) (store.Store, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("store URL %s: %w", raw, errUnparsable)
	}
	q := u.Query()
	prefix := q.Get("baton_prefix")
	q.Del("baton_prefix")
	allowVolatile := false
	if v := q.Get("baton_allow_volatile"); v != "" {
		if allowVolatile, err = strconv.ParseBool(v); err != nil {
			return nil, "", fmt.Errorf("store URL %s: baton_allow_volatile=%q: want true or false", raw, v)
		}
	}
	q.Del("baton_allow_volatile")
	u.RawQuery = q.Encode()
	s, err := Open(ctx, Config{URL: u.String(), KeyPrefix: prefix, Logger: log})
	if err != nil {
		return nil, "", fmt.Errorf("redis store %s: %w", raw, err)
	}
	if p := s.Persistence(); !p.Durable() && !allowVolatile {
		_ = s.Close()
		return nil, "", fmt.Errorf("redis store %s: refusing a server that cannot keep fencing tokens across a restart (%s): "+
			"restarted without its data, it lets stores opened afterwards hand out tokens that repeat earlier ones; "+
			"run Redis with appendonly yes and appendfsync always, or accept the risk with baton_allow_volatile=true in the store URL (docs/guarantees.md)",
			u.Redacted(), p)
	}
	return s, "redis:" + u.Redacted(), nil
}

// errUnparsable stands for a url.Parse error, whose message quotes the URL and whose inner error
// can quote a piece of a password (a ':' followed by part of it, taken for a port), which no
// masking of the whole password would find.
var errUnparsable = errors.New("not a valid URL: percent-encode reserved characters (@ : / ? # %) in the user name and password")

// OpenRedlockURL opens a RedlockStore from the part of a store URL after "redis+redlock://":
//
//	[user:pass@]h1:p1,h2:p2,h3:p3[?baton_prefix=P]
//
// an odd number (>= 3) of independent servers; no fencing tokens (see RedlockStore). It is the
// opener internal/storeurl registers for the redis+redlock scheme. name shows no user
// information; the errors may quote the URL, which storeurl masks.
func OpenRedlockURL(ctx context.Context, rest string, _ *slog.Logger) (store.Store, string, error) {
	cfg, name, err := redlockConfig(rest)
	if err != nil {
		return nil, "", fmt.Errorf("store URL %q: %w", "redis+redlock://"+rest, err)
	}
	s, err := OpenRedlock(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("redlock store %s: %w", name, err)
	}
	return s, name, nil
}

// redlockConfig parses "[user:pass@]h1:p1,h2:p2,...[?baton_prefix=P]" (the URL after the scheme).
// net/url cannot parse a host list, so it is split by hand.
func redlockConfig(rest string) (RedlockConfig, string, error) {
	var cfg RedlockConfig
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
