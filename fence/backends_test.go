package fence_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

func pgDSN() string {
	if v := os.Getenv("BATON_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// backend is one way users reach a resource's database: its transaction is what fence.Check
// is given.
type backend struct {
	// db runs statements outside any transaction (setup and reading the invariant).
	exec  func(ctx context.Context, q string, args ...any) error
	query func(ctx context.Context, q string) ([][2]int64, error)
	// begin opens a transaction: tx for fence.Check, exec for the caller's writes.
	begin func(ctx context.Context) (tx any, exec func(q string, args ...any) error, commit func() error, rollback func(), err error)
	// handle is what fence.Migrate and NewSQLStore take.
	handle any
	db     *sql.DB // nil for pgx
}

// pgSchema creates a fresh schema and returns a DSN whose connections use it.
func pgSchema(t testing.TB) string {
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, pgDSN())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL: %v", err)
		}
		t.Skipf("no PostgreSQL at %s: %v", pgDSN(), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "fence_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, pgDSN()); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	u, err := url.Parse(pgDSN())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func backends(t testing.TB) map[string]func(t testing.TB) *backend {
	return map[string]func(t testing.TB) *backend{
		"postgres-pgx": func(t testing.TB) *backend {
			pool, err := pgxpool.New(testCtx(t), pgSchema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return &backend{
				handle: pool,
				exec: func(ctx context.Context, q string, args ...any) error {
					_, err := pool.Exec(ctx, q, args...)
					return err
				},
				query: func(ctx context.Context, q string) ([][2]int64, error) {
					rows, _ := pool.Query(ctx, q)
					return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
						var v [2]int64
						return v, r.Scan(&v[0], &v[1])
					})
				},
				begin: func(ctx context.Context) (any, func(string, ...any) error, func() error, func(), error) {
					tx, err := pool.Begin(ctx)
					if err != nil {
						return nil, nil, nil, nil, err
					}
					exec := func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }
					return tx, exec, func() error { return tx.Commit(ctx) }, func() { _ = tx.Rollback(ctx) }, nil
				},
			}
		},
		"postgres-database/sql": func(t testing.TB) *backend {
			db, err := sql.Open("pgx", pgSchema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return sqlBackend(db)
		},
		"sqlite": func(t testing.TB) *backend {
			return sqlBackend(openSQLite(t))
		},
	}
}

func openSQLite(t testing.TB) *sql.DB {
	path := filepath.Join(t.TempDir(), "resource.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func sqlBackend(db *sql.DB) *backend {
	db.SetMaxOpenConns(8) // the shared PostgreSQL server has few connections to spare
	return &backend{
		handle: db,
		db:     db,
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		},
		query: func(ctx context.Context, q string) ([][2]int64, error) {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out [][2]int64
			for rows.Next() {
				var v [2]int64
				if err := rows.Scan(&v[0], &v[1]); err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, rows.Err()
		},
		begin: func(ctx context.Context) (any, func(string, ...any) error, func() error, func(), error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			exec := func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err }
			return tx, exec, tx.Commit, func() { _ = tx.Rollback() }, nil
		},
	}
}

func forEachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}

func mustExec(t *testing.T, b *backend, q string) {
	t.Helper()
	if err := b.exec(testCtx(t), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
