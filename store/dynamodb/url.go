package dynamodb

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/batonhq/baton/store"
)

// OpenURL opens a store from the part of a DynamoDB store URL after "dynamodb://":
//
//	table[?region=R&endpoint=http://host:port&create_table=true&max_attempts=10]
//
// Credentials come from the SDK's default chain (AWS_ACCESS_KEY_ID…, shared files, an instance
// or task role), never from the URL. It is the opener cmd/baton-full registers for the
// dynamodb scheme. name is safe to log.
func OpenURL(ctx context.Context, rest string, _ *slog.Logger) (st store.Store, name string, err error) {
	cfg, name, err := parseURL(rest)
	if err != nil {
		return nil, "", fmt.Errorf("store URL dynamodb://%s: %w", rest, err)
	}
	s, err := Open(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("store %s: %w", name, err)
	}
	return s, name, nil
}

func parseURL(rest string) (cfg Config, name string, err error) {
	table, query, _ := strings.Cut(rest, "?")
	table = strings.TrimSuffix(table, "/")
	if !validTable(table) {
		return cfg, "", fmt.Errorf("table %q: want 3 to 255 characters of a-z, A-Z, 0-9, '_', '-', '.'", table)
	}
	cfg.Table = table
	q, err := url.ParseQuery(query)
	if err != nil {
		return cfg, "", err
	}
	for k := range q {
		v := q.Get(k)
		switch k {
		case "region":
			cfg.Region = v
		case "endpoint":
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return cfg, "", fmt.Errorf("endpoint %q: want http://host:port or https://host", v)
			}
			cfg.Endpoint = v
		case "create_table":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return cfg, "", fmt.Errorf("create_table %q: want true or false", v)
			}
			cfg.CreateTable = b
		case "max_attempts":
			i, err := strconv.Atoi(v)
			if err != nil || i < 1 || i > 100 {
				return cfg, "", fmt.Errorf("max_attempts %q: want an integer from 1 to 100", v)
			}
			cfg.MaxAttempts = i
		default:
			return cfg, "", fmt.Errorf("unknown parameter %q (region, endpoint, create_table, max_attempts)", k)
		}
	}
	name = "dynamodb:" + table
	if cfg.Region != "" {
		name += "@" + cfg.Region
	}
	return cfg, name, nil
}

// validTable checks DynamoDB's rule for table names.
func validTable(t string) bool {
	if len(t) < 3 || len(t) > 255 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
