package storeurl

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

// redisServer starts a redis-server of the test's own on a free loopback port, without
// persistence, and kills it when the test ends.
func redisServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := rdb.Ping(context.Background()).Err(); err == nil {
			return addr
		} else if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s: %v", addr, err)
		}
		select {
		case <-exited:
			t.Fatal("redis-server exited")
		case <-time.After(20 * time.Millisecond): // polling for readiness
		}
	}
}

func TestOpenRedis(t *testing.T) {
	ctx := context.Background()
	a, b, c := redisServer(t), redisServer(t), redisServer(t)
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
	check("redis://"+a+"/2?baton_prefix=app:", "redis:redis://"+a+"/2", true)
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
