package redis_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	batonredis "github.com/batonhq/baton/store/redis"
)

// Open warns, naming the server's persistence settings, when the server does not persist every
// write (fencing tokens then go back after a restart for stores opened after it), and says so
// when it could not check (CONFIG not permitted by the user's ACL); it is silent on a server
// with appendonly yes and appendfsync always.
func TestOpenWarnsWithoutDurablePersistence(t *testing.T) {
	volatile := startServer(t, false, "--save", "3600 1")
	durable := startServer(t, true)
	noConfig := startServer(t, true, "--user", "noconf", "on", ">pw", "~*", "&*", "+@all", "-config")
	for _, c := range []struct {
		name        string
		opts        *goredis.Options
		wantDurable bool
		want        []string // in the log; none: no warning
	}{
		{"no AOF", &goredis.Options{Addr: volatile.addr()}, false,
			[]string{"level=WARN", "does not persist every write", "appendonly=no", "appendfsync=everysec", `save="3600 1"`, "addr=" + volatile.addr()}},
		{"AOF always", &goredis.Options{Addr: durable.addr()}, true, nil},
		{"CONFIG not permitted", &goredis.Options{Addr: noConfig.addr(), Username: "noconf", Password: "pw"}, false,
			[]string{"level=WARN", "could not check", "NOPERM"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			st, err := batonredis.Open(testCtx(t), batonredis.Config{Options: c.opts, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if got := st.Persistence().Durable(); got != c.wantDurable {
				t.Errorf("Persistence() = %+v, Durable %v; want %v", st.Persistence(), got, c.wantDurable)
			}
			log := buf.String()
			if c.want == nil && log != "" {
				t.Errorf("logged on a durable server: %s", log)
			}
			for _, w := range c.want {
				if !strings.Contains(log, w) {
					t.Errorf("log lacks %q:\n%s", w, log)
				}
			}
			t.Logf("%s", strings.TrimSpace(log))
		})
	}
}
