package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// rawCycle is the baseline: the minimum statements that take and free a lock row, through the
// same driver, with the same pragmas and pool settings as the store.
func rawCycle(b *testing.B, dir string) storetest.CycleFunc {
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(dir, "raw.db"), sqlite.Config{}))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS raw_locks (key TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID`); err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, key string) error {
		res, err := db.ExecContext(ctx, `INSERT INTO raw_locks (key, holder, expires_at) VALUES (?, 'bench', 0) ON CONFLICT DO NOTHING`, key)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("raw insert took no row for %s", key)
		}
		_, err = db.ExecContext(ctx, `DELETE FROM raw_locks WHERE key = ? AND holder = 'bench'`, key)
		return err
	}
}

func BenchmarkLockCycle(b *testing.B) {
	dir := b.TempDir()
	raw := rawCycle(b, dir)
	s := openDefault(b, filepath.Join(dir, "baton.db"))
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchLockCycle(b, locker, raw)
}

// BenchmarkLockCycleAudit is the lock cycle at 8 clients with the audit log on (as baton serve
// runs it): the price of one event row per grant and per release.
func BenchmarkLockCycleAudit(b *testing.B) {
	dir := b.TempDir()
	raw := rawCycle(b, dir)
	locker, err := baton.NewLocker(open(b, filepath.Join(dir, "baton.db")), nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchPaired(b, 8, raw, storetest.LockerCycle(locker))
}

func BenchmarkHandoff16(b *testing.B) {
	locker, err := baton.NewLocker(openDefault(b, filepath.Join(b.TempDir(), "baton.db")), nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchHandoff(b, locker, 16)
}

// openDefault opens a store with the library's defaults (no audit log), as benchmarks measure.
func openDefault(b *testing.B, path string) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkCrossHandoff: a key's handoff between leases and jobs (the one-resource line), with
// lease to lease as the baseline in the same run.
func BenchmarkCrossHandoff(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "handoff.db"), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	storetest.BenchCrossHandoff(b, s)
}

// BenchmarkBeyond: a grant with one limit, and a shared grant, against the plain grant.
func BenchmarkBeyond(b *testing.B) {
	s := openDefault(b, filepath.Join(b.TempDir(), "baton.db"))
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchBeyond(b, locker, s)
}

// BenchmarkTreeGrant: an exclusive grant and release three levels below a tree's root, against
// the same on a flat key, in the same run.
func BenchmarkTreeGrant(b *testing.B) {
	s := openDefault(b, filepath.Join(b.TempDir(), "baton.db"))
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchTreeGrant(b, locker, s)
}
