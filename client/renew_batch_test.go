package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// countingServer is a server whose requests are counted by path; with oldServer it answers the
// batch renew endpoint as a server that predates it does (405: GET-only /v1/locks/{key}).
func countingServer(t *testing.T, oldServer bool) (url string, counts func(path string) int64) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Version: "test", StoreName: "sqlite", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := map[string]int64{}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n[r.URL.Path]++
		mu.Unlock()
		if oldServer && r.URL.Path == "/v1/locks/renew-batch" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = io.WriteString(w, `{"type":"https://baton.dev/problems/method_not_allowed","title":"Method not allowed","status":405,"code":"method_not_allowed"}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	return ts.URL, func(path string) int64 { mu.Lock(); defer mu.Unlock(); return n[path] }
}

// Many renewals at once through one client store share batch requests, each keeps its own
// answer, and against a server without the batch endpoint they fall back to single renewals.
func TestConcurrentRenewalsShareRequests(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("oldServer=%v", old), func(t *testing.T) {
			url, counts := countingServer(t, old)
			s, err := client.NewStore(client.Config{BaseURL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const n = 300
			leases := make([]*store.Lease, n)
			for i := range leases {
				l, err := s.Acquire(ctx, &store.AcquireParams{Key: fmt.Sprintf("crs/%03d", i), LeaseID: fmt.Sprintf("crs-%03d", i), Holder: "h", TTL: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				leases[i] = l
			}
			// Every tenth renewal names a lease that is not held.
			var wg sync.WaitGroup
			var bad atomic.Int64
			for i, l := range leases {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := l.ID
					if i%10 == 0 {
						id = "not-" + id
					}
					got, err := s.Renew(ctx, &store.RenewParams{Key: l.Key, LeaseID: id, TTL: 20 * time.Second})
					if i%10 == 0 {
						if !errors.Is(err, store.ErrNotHeld) {
							t.Errorf("renew %s with another ID: %v, %v", l.Key, got, err)
							bad.Add(1)
						}
						return
					}
					if err != nil || got.Key != l.Key || got.ID != l.ID || got.Token != l.Token || got.TTLLeft <= 10*time.Second {
						t.Errorf("renew %s: %+v, %v", l.Key, got, err)
						bad.Add(1)
					}
				}()
			}
			wg.Wait()
			singles, batches := counts("/v1/locks/renew"), counts("/v1/locks/renew-batch")
			t.Logf("%d renewals: %d single requests, %d batch requests", n, singles, batches)
			if old {
				if singles != n || batches > 1 {
					t.Fatalf("old server: %d single and %d batch requests for %d renewals; want %d and at most 1", singles, batches, n, n)
				}
				return
			}
			if singles+batches >= n || batches == 0 {
				t.Fatalf("%d single and %d batch requests for %d concurrent renewals: nothing was combined", singles, batches, n)
			}
		})
	}
}
