package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/batonhq/baton/store"
)

// URLOpener returns the opener of store URLs of scheme (postgres or postgresql, which pgx reads
// alike), for the part of the URL after "scheme://":
//
//	[user[:pass]@]host[:port][,host:port…]/db[?baton_schema=NAME&baton_max_conns=N&…]
//
// The store has the audit log on (a server lists it). baton_schema picks the schema (default
// DefaultSchema); baton_max_conns the pool's connections for statements (Config.MaxConns);
// baton_failover_quarantine how long grants wait after a failover (Config.FailoverQuarantine,
// e.g. 10m); the rest of the URL goes to pgx. It is the opener internal/storeurl registers for both schemes.
//
// name shows the URL without its password. The errors may quote the URL, secrets included:
// storeurl masks them, and the secret parameters of name (password=, sslpassword=), as it does
// for every opener.
func URLOpener(scheme string) func(ctx context.Context, rest string, log *slog.Logger) (store.Store, string, error) {
	return func(ctx context.Context, rest string, _ *slog.Logger) (store.Store, string, error) {
		return openURL(ctx, scheme+"://"+rest)
	}
}

func openURL(ctx context.Context, raw string) (store.Store, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("store URL %s: %w", raw, errUnparsable)
	}
	q := u.Query()
	cfg := Config{Schema: q.Get("baton_schema"), Audit: true}
	q.Del("baton_schema")
	if v := q.Get("baton_max_conns"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxMaxConns {
			return nil, "", fmt.Errorf("store URL %s: baton_max_conns=%q: want a number of connections, 1 to %d", raw, v, MaxMaxConns)
		}
		cfg.MaxConns = n
	}
	q.Del("baton_max_conns")
	if v := q.Get("baton_failover_quarantine"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > store.MaxTTL {
			return nil, "", fmt.Errorf("store URL %s: baton_failover_quarantine=%q: want a duration such as 90s, above 0 and at most %s", raw, v, store.MaxTTL)
		}
		cfg.FailoverQuarantine = d
	}
	q.Del("baton_failover_quarantine")
	u.RawQuery = q.Encode()
	s, err := Open(ctx, u.String(), cfg)
	if err != nil {
		return nil, "", fmt.Errorf("postgres store %s: %w", raw, err)
	}
	return s, "postgres:" + u.Redacted(), nil
}

// errUnparsable stands for a url.Parse error, whose message quotes the URL and whose inner error
// can quote a piece of a password (a ':' followed by part of it, taken for a port), which no
// masking of the whole password would find.
var errUnparsable = errors.New("not a valid URL: percent-encode reserved characters (@ : / ? # %) in the user name and password")
