package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
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

// BenchmarkHTTPLockCycleOverhead: what the HTTP API itself costs per lock cycle, client and
// server together: the Go client's Locker through a real server on loopback against the
// in-process Locker, both on a store that does no work (noWorkStore), at 1 and 64 clients.
// cpu-us/op is this process's CPU time per cycle over HTTP, baseline-cpu-us/op in process;
// allocs/op and B/op are the HTTP cycle's.
func BenchmarkHTTPLockCycleOverhead(b *testing.B) {
	st := noWorkStore{}
	srv, err := server.New(server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64 // as many as clients: no connection is opened per request
	remote, err := client.NewStore(client.Config{BaseURL: ts.URL, HTTPClient: &http.Client{Transport: t}})
	if err != nil {
		b.Fatal(err)
	}
	defer remote.Close()
	local, _ := baton.NewLocker(st, nil)
	overHTTP, _ := baton.NewLocker(remote, nil)
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			b.ReportAllocs()
			storetest.BenchAgainst(b, clients, storetest.LockerCycle(overHTTP), storetest.Baseline{Cycle: storetest.LockerCycle(local)})
		})
	}
}

// noWorkStore grants every acquire and every release at once, keeping nothing (and panics on
// any other call): the lock cycle with the store's own work left out.
type noWorkStore struct{ store.Store }

func (noWorkStore) Acquire(_ context.Context, p *store.AcquireParams) (*store.Lease, error) {
	now := time.Now()
	return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Token: 1, AcquiredAt: now,
		ExpiresAt: now.Add(p.TTL), TTLLeft: p.TTL}, nil
}

func (noWorkStore) Release(context.Context, *store.ReleaseParams) (*store.ReleaseResult, error) {
	return &store.ReleaseResult{Held: time.Millisecond}, nil
}

func (noWorkStore) Close() error { return nil }
