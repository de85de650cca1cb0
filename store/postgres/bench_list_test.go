package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkListPrefix1M is List with a prefix on a store holding 1,000,000 leases, against the
// same List on one holding 1,000: the held leases must not slow a listing down.
func BenchmarkListPrefix1M(b *testing.B) {
	smallSchema, bigSchema := newSchema(b), newSchema(b)
	small, big := openDefault(b, smallSchema), openDefault(b, bigSchema)
	loadHeld(b, small, smallSchema, 1_000)
	loadHeld(b, big, bigSchema, 1_000_000)
	storetest.BenchListScale(b, small, big)
}

// loadHeld inserts n held leases, named as storetest.ListScaleFill names them, in one statement,
// straight into the table (loading through Acquire would take minutes), then analyzes it.
func loadHeld(b *testing.B, s *postgres.Store, schema string, n int) {
	b.Helper()
	ctx := context.Background()
	table := pgx.Identifier{schema, "leases"}.Sanitize()
	_, err := s.Pool().Exec(ctx, `INSERT INTO `+table+` (key, lease_id, holder, token, acquired_at, expires_at, available_at,
		cooldown_ms, lock_delay_ms)
	SELECT CASE WHEN i < $1 / 2 THEN 'a/' ELSE 'z/' END || lpad(i::text, 8, '0'), 'fill-' || i, 'fill', nextval('`+
		pgx.Identifier{schema, "token_seq"}.Sanitize()+`'), now(), now() + interval '24 hours', now() + interval '24 hours', 0, 0
	FROM generate_series(0, $1 - 1) AS i`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE `+table); err != nil {
		b.Fatal(err)
	}
	var last string
	if err := s.Pool().QueryRow(ctx, `SELECT max(key) FROM `+table).Scan(&last); err != nil {
		b.Fatal(err)
	}
	if want := storetest.ListScaleFill(n-1, n); last != want {
		b.Fatalf("loaded up to %q, want %q", last, want)
	}
}
