package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func harness() storetest.Harness {
	return storetest.Harness{NewBackend: func(t testing.TB) storetest.Backend {
		path := filepath.Join(t.TempDir(), "baton.db")
		return storetest.Backend{
			Open: func(t testing.TB) store.Store { return open(t, path) },
			DeleteRow: func(t testing.TB, key string) {
				s := open(t, path)
				if _, err := s.DB().Exec(`DELETE FROM leases WHERE key = ?`, key); err != nil {
					t.Fatal(err)
				}
			},
		}
	}}
}

func TestConformance(t *testing.T) { storetest.Run(t, harness()) }
