package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// What a process of the version before the one-resource line would write fails instead of
// breaking the exclusion: its claim starts a job without deciding its gate, and its grant over an
// expired attempt's gate keeps the attempt's job_id. Both are the statements that version runs,
// reduced to the columns that matter.
func TestEarlierVersionsAreRefused(t *testing.T) {
	ctx := context.Background()
	s := jobStore(t, store.Kind{Name: "k"})
	jobs, leases := pgx.Identifier{s.Schema(), "jobs"}.Sanitize(), pgx.Identifier{s.Schema(), "leases"}.Sanitize()
	j := submit(t, s, "k", "old/1")
	wantCheck := func(what, constraint string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != constraint {
			t.Fatalf("%s: %v; want a check violation of %s", what, err, constraint)
		}
	}
	try := func(sql string, args ...any) (err error) {
		withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
			_, err = conn.Exec(ctx, sql, args...)
			return nil
		})
		return err
	}
	err := try("UPDATE "+jobs+" SET state = 'running', attempt = 1, token = 1, lease_expires_at = now() + interval '1 minute' WHERE id = $1", j.ID)
	wantCheck("an earlier version's claim", "jobs_running_gated", err)

	// A job holds its key's row (the key was locked before).
	l, err := s.Acquire(ctx, &store.AcquireParams{Key: "old/2", LeaseID: "l1", Holder: "ops", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "old/2", LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "k2"}}); err != nil {
		t.Fatal(err)
	}
	j2 := submit(t, s, "k2", "old/2")
	if got := claim(t, s, 1, "k2"); len(got) != 1 || got[0].ID != j2.ID {
		t.Fatalf("claimed %v; want job %d", got, j2.ID)
	}
	err = try("UPDATE " + leases + " SET lease_id = 'old-grant', holder = 'old' WHERE key = 'old/2' AND job_id <> 0")
	wantCheck("an earlier version's grant over a job's gate", "leases_gate_is_the_stores", err)
}
