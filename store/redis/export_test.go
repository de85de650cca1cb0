package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

// LiveLeaseID returns the ID of the live lease on key under prefix on rdb's server ("" if
// none), in either key layout: what one node holds, for the Redlock tests.
func LiveLeaseID(ctx context.Context, rdb *goredis.Client, prefix, key string) (string, error) {
	l, err := LiveLease(ctx, rdb, prefix, key)
	if err != nil || l == nil {
		return "", err
	}
	return l.ID, nil
}

// LiveLease returns the live lease on key under prefix on rdb's server (nil if none), as Get
// reads it there.
func LiveLease(ctx context.Context, rdb *goredis.Client, prefix, key string) (*store.Lease, error) {
	r, err := newNode(rdb, prefix, time.Hour).get(ctx, key)
	if err != nil || r.status != "ok" {
		return nil, err
	}
	return r.lease, nil
}
