package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	batonredis "github.com/batonhq/baton/store/redis"
)

// The store works with requirepass (the default user) and with an ACL user confined to its key
// prefix and channels; a wrong password fails Open and the error does not show the password.
func TestAuthPasswordAndACLUser(t *testing.T) {
	srv := startServer(t, false, "--requirepass", "s3cret-pass",
		"--user", "baton", "on", ">acl-pass", "~acl:*", "&acl:*", "+@all")
	ctx := t.Context()
	if st, err := batonredis.Open(ctx, batonredis.Config{Options: &goredis.Options{Addr: srv.addr(), Password: "wrong"}}); err == nil {
		st.Close()
		t.Fatal("Open with a wrong password succeeded")
	}
	for _, c := range []struct {
		name string
		cfg  batonredis.Config
	}{
		{"requirepass", batonredis.Config{Options: &goredis.Options{Addr: srv.addr(), Password: "s3cret-pass"}}},
		{"acl-user", batonredis.Config{Options: &goredis.Options{Addr: srv.addr(), Username: "baton", Password: "acl-pass"}, KeyPrefix: "acl:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := batonredis.Open(ctx, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			l, err := baton.NewLocker(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := l.TryAcquire(ctx, "auth/key")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.TryAcquire(ctx, "auth/key"); err == nil {
				t.Fatal("a second holder was granted the key")
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := l.TryAcquire(ctx, "auth/key")
			if err != nil || b.Token <= a.Token {
				t.Fatalf("after release: %v, token %d after %d", err, b.Token, a.Token)
			}
			_ = b.Release(ctx)
		})
	}
}
