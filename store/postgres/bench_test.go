package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/storetest"
)

// rawCycle is the baseline: the minimum statements that take and free a lock row, through pgx
// with a pool of the same size as the store's.
func rawCycle(b *testing.B, schema string, maxConns int32) storetest.CycleFunc {
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(dsn())
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	table := pgx.Identifier{schema, "raw_locks"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	insert := `INSERT INTO ` + table + ` (key, holder, expires_at) VALUES ($1, 'bench', now() + interval '15 seconds') ON CONFLICT DO NOTHING`
	del := `DELETE FROM ` + table + ` WHERE key = $1 AND holder = 'bench'`
	return func(ctx context.Context, key string) error {
		tag, err := pool.Exec(ctx, insert, key)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("raw insert took no row for %s", key)
		}
		_, err = pool.Exec(ctx, del, key)
		return err
	}
}

func BenchmarkLockCycle(b *testing.B) {
	schema := newSchema(b)
	s := openDefault(b, schema)
	// The store holds one connection for LISTEN; the baseline gets as many for its statements as
	// the store has for its own.
	raw := rawCycle(b, schema, s.Pool().Config().MaxConns-1)
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchLockCycle(b, locker, raw)
}

// BenchmarkLockCycleAudit is the lock cycle at 8 clients with the audit log on (as baton serve
// runs it): the price of one event row per grant and per release.
func BenchmarkLockCycleAudit(b *testing.B) {
	schema := newSchema(b)
	s := openStore(b, schema)
	raw := rawCycle(b, schema, s.Pool().Config().MaxConns-1)
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchPaired(b, 8, raw, storetest.LockerCycle(locker))
}

func BenchmarkHandoff16(b *testing.B) {
	locker, err := baton.NewLocker(openDefault(b, newSchema(b)), nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchHandoff(b, locker, 16)
}

// openDefault opens a store with the library's defaults (no audit log), as benchmarks measure.
func openDefault(b *testing.B, schema string) *postgres.Store {
	s, err := postgres.Open(context.Background(), dsn(), postgres.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkCrossHandoff: a key's handoff between leases and jobs (the one-resource line), with
// lease to lease as the baseline in the same run.
func BenchmarkCrossHandoff(b *testing.B) {
	storetest.BenchCrossHandoff(b, openDefault(b, newSchema(b)))
}

// BenchmarkBeyond: a grant with one limit, and a shared grant, against the plain grant.
func BenchmarkBeyond(b *testing.B) {
	s := openDefault(b, newSchema(b))
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchBeyond(b, locker, s)
}
