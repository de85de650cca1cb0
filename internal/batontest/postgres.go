package batontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresDSN is $BATON_TEST_POSTGRES_DSN, or the test database on localhost.
func PostgresDSN() string {
	if v := os.Getenv("BATON_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// PostgresSchema connects to the test PostgreSQL (skipping the test when it is unreachable,
// unless CI is set) and returns the connection and a fresh schema name, dropped with everything
// in it when the test ends.
func PostgresSchema(t testing.TB) (*pgx.Conn, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresDSN())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable under CI: %v", err)
		}
		t.Skipf("PostgreSQL unreachable (%v); set BATON_TEST_POSTGRES_DSN", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "bt_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
		_ = conn.Close(ctx)
	})
	return conn, schema
}
