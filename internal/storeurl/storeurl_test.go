package storeurl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	st, name, err := Open(ctx, "sqlite://"+path)
	if err != nil || name != "sqlite:"+path {
		t.Fatalf("sqlite: %v %q", err, name)
	}
	st.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no database file: %v", err)
	}
	for _, bad := range []string{"", "baton.db", "mysql://x", "sqlite://"} {
		if _, _, err := Open(ctx, bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	_, _, err = Open(ctx, "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("unreachable postgres: %v (must fail without showing the password)", err)
	}
	for _, bad := range []string{"0", "-1", "x", "1001"} {
		_, _, err := Open(ctx, "postgres://u@127.0.0.1:1/db?connect_timeout=1&baton_max_conns="+bad)
		if err == nil || !strings.Contains(err.Error(), "baton_max_conns") {
			t.Errorf("baton_max_conns=%s: %v, want refused naming the parameter", bad, err)
		}
	}
}
