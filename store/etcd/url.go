package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/batonhq/baton/store"
)

// OpenURL opens a store from the part of an etcd store URL after "etcd://":
//
//	[user:pass@]host:port[,host:port…][?baton_prefix=P&dial_timeout=5s]
//
// It is the opener cmd/baton-full registers for the etcd scheme. name is safe to log.
func OpenURL(ctx context.Context, rest string, _ *slog.Logger) (st store.Store, name string, err error) {
	cfg, name, err := parseURL(rest)
	if err != nil {
		return nil, "", fmt.Errorf("store URL etcd://%s: %w", redactUser(rest), err)
	}
	s, err := Open(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("store %s: %w", name, err)
	}
	return s, name, nil
}

func parseURL(rest string) (cfg Config, name string, err error) {
	hosts, query, _ := strings.Cut(rest, "?")
	hosts = strings.TrimSuffix(hosts, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		user, pass, _ := strings.Cut(hosts[:at], ":")
		if cfg.Username, err = url.PathUnescape(user); err != nil {
			return cfg, "", fmt.Errorf("user: %w", err)
		}
		if cfg.Password, err = url.PathUnescape(pass); err != nil {
			return cfg, "", fmt.Errorf("password: %w", err)
		}
		hosts = hosts[at+1:]
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" || !strings.Contains(h, ":") || strings.ContainsAny(h, "/@") {
			return cfg, "", fmt.Errorf("bad host %q: want host:port", h)
		}
		cfg.Endpoints = append(cfg.Endpoints, "http://"+h)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return cfg, "", err
	}
	for k := range q {
		switch k {
		case "baton_prefix":
			cfg.Prefix = q.Get(k)
		case "dial_timeout":
			d, err := time.ParseDuration(q.Get(k))
			if err != nil || d <= 0 {
				return cfg, "", fmt.Errorf("dial_timeout %q: want a positive duration such as 5s", q.Get(k))
			}
			cfg.DialTimeout = d
		default:
			return cfg, "", fmt.Errorf("unknown parameter %q (baton_prefix, dial_timeout)", k)
		}
	}
	return cfg, "etcd:" + hosts, nil
}

// redactUser drops user information from a URL rest, for error messages.
func redactUser(rest string) string {
	hosts, query, hasQuery := strings.Cut(rest, "?")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		hosts = "xxxxx@" + hosts[at+1:]
	}
	if hasQuery {
		return hosts + "?" + query
	}
	return hosts
}
