package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkListPrefix1M is List with a prefix on a store holding 1,000,000 leases, against the
// same List on one holding 1,000: the held leases must not slow a listing down.
func BenchmarkListPrefix1M(b *testing.B) {
	dir := b.TempDir()
	small := openDefault(b, filepath.Join(dir, "small.db"))
	big := openDefault(b, filepath.Join(dir, "big.db"))
	loadHeld(b, small, 1_000)
	loadHeld(b, big, 1_000_000)
	storetest.BenchListScale(b, small, big)
}

// loadHeld inserts n held leases, named as storetest.ListScaleFill names them, in one statement,
// straight into the table: loading through Acquire would take minutes.
func loadHeld(b *testing.B, s *sqlite.Store, n int) {
	b.Helper()
	now := time.Now()
	_, err := s.DB().ExecContext(context.Background(), `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?1)
		INSERT INTO leases (key, lease_id, holder, token, acquired_at, expires_at, ended, available_at, cooldown_ns, lock_delay_ns)
		SELECT iif(i < ?1 / 2, printf('a/%08d', i), printf('z/%08d', i)), 'fill-' || i, 'fill', i + 1, ?2, ?3, 0, ?3, 0, 0 FROM c`,
		n, now.UnixNano(), now.Add(24*time.Hour).UnixNano())
	if err != nil {
		b.Fatal(err)
	}
	if got, want := lastKey(b, s), storetest.ListScaleFill(n-1, n); got != want {
		b.Fatalf("loaded up to %q, want %q", got, want)
	}
}

func lastKey(b *testing.B, s *sqlite.Store) string {
	var k string
	if err := s.DB().QueryRow(`SELECT max(key) FROM leases`).Scan(&k); err != nil {
		b.Fatal(err)
	}
	return k
}
