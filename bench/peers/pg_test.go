package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgreSQL helpers of the River comparisons (river_jobs_test.go, river_insert_test.go).

func pgDSN() string {
	if v := os.Getenv("BATON_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pgSchema names a fresh schema prefix_<random>, created if create (otherwise its user creates
// it), and dropped when b ends.
func pgSchema(b *testing.B, pool *pgxpool.Pool, prefix string, create bool) string {
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	schema := prefix + "_" + hex.EncodeToString(raw)
	if create {
		if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			b.Error(err)
		}
	})
	return schema
}

// pgPool is a pool of maxConns connections, closed when b ends.
func pgPool(b *testing.B, maxConns int32) *pgxpool.Pool {
	pc, err := pgxpool.ParseConfig(pgDSN())
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = maxConns
	// JIT off, as Baton's own pool sets it (postgres.Open): with it on, a plan whose cost
	// estimate passes jit_above_cost is compiled by LLVM on each execution.
	pc.ConnConfig.RuntimeParams["jit"] = "off"
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}
