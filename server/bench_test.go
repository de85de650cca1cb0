package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkHTTPLockCycle: acquire + release through the HTTP API (the Go client's Locker, over
// loopback TCP) against the same SQLite store used in-process, paired in one run.
func BenchmarkHTTPLockCycle(b *testing.B) {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	remote, err := client.NewStore(client.Config{BaseURL: ts.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer remote.Close()
	local, _ := baton.NewLocker(st, nil)
	overHTTP, _ := baton.NewLocker(remote, nil)
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			storetest.BenchPaired(b, clients, storetest.LockerCycle(local), storetest.LockerCycle(overHTTP))
		})
	}
}
