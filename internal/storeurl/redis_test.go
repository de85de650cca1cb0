package storeurl

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/testredis"
	"github.com/batonhq/baton/store"
)

func TestOpenRedis(t *testing.T) {
	ctx := context.Background()
	a, b, c := testredis.Start(t), testredis.Start(t), testredis.Start(t)
	check := func(raw, wantName string, wantFencing bool) {
		t.Helper()
		st, name, err := Open(ctx, raw)
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		defer st.Close()
		if name != wantName || st.Capabilities().FencingTokens != wantFencing {
			t.Fatalf("Open(%q) = %q, %+v", raw, name, st.Capabilities())
		}
		l, err := st.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "id", Holder: "h", TTL: time.Second})
		if err != nil || l.Token == 0 {
			t.Fatalf("acquire through %q: %+v, %v", raw, l, err)
		}
		if _, err := st.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "id"}); err != nil {
			t.Fatal(err)
		}
	}
	check("redis://"+a+"/2?baton_prefix=app:&baton_allow_volatile=true", "redis:redis://"+a+"/2", true)
	rdb := goredis.NewClient(&goredis.Options{Addr: a, DB: 2})
	defer rdb.Close()
	if n, err := rdb.Exists(ctx, "app:token").Result(); err != nil || n != 1 {
		t.Fatalf("prefix and database not applied: EXISTS app:token in db 2 = %d, %v", n, err)
	}
	check("redis+redlock://"+a+","+b+","+c+"?baton_prefix=rl:", "redis+redlock:"+a+","+b+","+c, false)
	for _, bad := range []string{
		"redis+redlock://" + a + "," + b,             // even
		"redis+redlock://" + a + "," + b + ",nohost", // no port
		"redis+redlock://" + a + "," + b + "," + c + "?x=1",
		"redis://u:s3cret@127.0.0.1:1/0?dial_timeout=1s",
		"redis+redlock://u:s3cret@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
	} {
		_, _, err := Open(ctx, bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v, want an error without the password", bad, err)
		}
	}
}

// A Redis server that does not persist every write is refused, naming its settings and the
// opt-out, unless the URL has baton_allow_volatile=true; one with appendonly yes and appendfsync
// always is accepted as it is.
func TestOpenRedisRefusesVolatileServer(t *testing.T) {
	ctx := context.Background()
	volatile := testredis.Start(t)
	durable := testredis.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	for _, raw := range []string{"redis://" + volatile, "redis://" + volatile + "/0?baton_allow_volatile=false"} {
		st, _, err := Open(ctx, raw)
		if err == nil {
			st.Close()
			t.Fatalf("Open(%q) accepted a server without persistence", raw)
		}
		for _, want := range []string{"appendonly=no", "appendfsync=everysec", "baton_allow_volatile=true"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q): %v; want it to say %q", raw, err, want)
			}
		}
	}
	if _, _, err := Open(ctx, "redis://"+volatile+"?baton_allow_volatile=maybe"); err == nil || !strings.Contains(err.Error(), "baton_allow_volatile") {
		t.Errorf("baton_allow_volatile=maybe: %v, want refused naming the parameter", err)
	}
	for _, raw := range []string{"redis://" + volatile + "?baton_allow_volatile=true", "redis://" + durable} {
		st, _, err := Open(ctx, raw)
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		st.Close()
	}
}
