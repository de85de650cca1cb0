package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// LiveLeaseID returns the ID of the live lease on key under prefix on rdb's server ("" if
// none), in either key layout: what one node holds, for the Redlock tests.
func LiveLeaseID(ctx context.Context, rdb *goredis.Client, prefix, key string) (string, error) {
	r, err := newNode(rdb, prefix, time.Hour).get(ctx, key)
	if err != nil || r.status != "ok" {
		return "", err
	}
	return r.lease.ID, nil
}
