package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// A file of version 6 carries over to owners (migration 0007): its leases and attempts belong to
// no owner, and an audited file is still audited, by triggers that record the principal
// (re-created in the migration's transaction, although auditSQL creates only missing triggers
// and the store opening it does not ask for audit). A file without audit stays without.
func TestMigrateToOwners(t *testing.T) {
	for _, audited := range []bool{true, false} {
		t.Run(map[bool]string{true: "audited", false: "unaudited"}[audited], func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "baton.db")
			makeVersion6(t, path, audited)

			s, err := Open(ctx, path, Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var n int
			if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%audit%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: len(auditTriggers), false: 0}[audited]; n != want || len(auditTriggers) != 12 {
				t.Fatalf("%d audit triggers after the migration (audit.sql has %d), want %d", n, len(auditTriggers), want)
			}

			// The lease of version 6 is nobody's: "" renews and releases it, "alice" cannot.
			if l, err := s.Get(ctx, "old"); err != nil || l.Owner != "" {
				t.Fatalf("Get(old) = %+v, %v; want the lease, owner \"\"", l, err)
			}
			if _, err := s.Renew(ctx, &store.RenewParams{Key: "old", LeaseID: "old-1", Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
				t.Fatalf("renew of the old lease by alice: %v; want ErrNotHeld", err)
			}
			if _, err := s.Release(ctx, &store.ReleaseParams{Key: "old", LeaseID: "old-1"}); err != nil {
				t.Fatalf("release of the old lease without an owner: %v", err)
			}
			// So is the running attempt.
			if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: 1, Token: 2, Owner: "alice"}); !errors.Is(err, store.ErrNotHeld) {
				t.Fatalf("completion of the old attempt by alice: %v; want ErrNotHeld", err)
			}
			if j, err := s.CompleteJob(ctx, &store.CompleteParams{ID: 1, Token: 2}); err != nil || j.Owner != "" {
				t.Fatalf("completion of the old attempt without an owner = %+v, %v", j, err)
			}
			// New leases record their owner.
			if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "new", LeaseID: "n", Holder: "h", Owner: "alice", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			events, err := s.Events(ctx, &store.EventsParams{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range events {
				got = append(got, e.Kind+" "+e.Key+" "+e.Principal)
			}
			want := []string{"acquire old ", "job_claim r ", "release old ", "job_complete r ", "acquire new alice"}
			if !audited {
				want = nil
			}
			if len(got) != len(want) {
				t.Fatalf("events %q, want %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("events %q, want %q", got, want)
				}
			}
		})
	}
}

// makeVersion6 creates the file at path as version 6 left it, with the audit triggers of then
// (testdata/audit_0006.sql) if audited, a live lease "old" (ID old-1) and a running job 1 (token
// 2) on resource "r".
func makeVersion6(t *testing.T, path string, audited bool) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", DSN(path, Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:6] {
		if m.version > 6 {
			t.Fatalf("migration %s before version 7", m.name)
		}
		if err := applyOne(ctx, db, m, false); err != nil {
			t.Fatal(err)
		}
	}
	if audited {
		old, err := os.ReadFile("testdata/audit_0006.sql")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(old)); err != nil {
			t.Fatal(err)
		}
	}
	now, hour := time.Now().UnixNano(), int64(time.Hour)
	for _, q := range []string{
		`INSERT INTO leases (key, lease_id, holder, token, acquired_at, expires_at, available_at, cooldown_ns, lock_delay_ns)
			VALUES ('old', 'old-1', 'h', 1, ?1, ?1 + ?2, ?1 + ?2, 0, 0)`,
		`INSERT INTO job_kinds (name, policy, max_attempts) VALUES ('k', 'queue', 1)`,
		`INSERT INTO resources (key, updated_at) VALUES ('r', ?1)`,
		`INSERT INTO jobs (seq, kind, resource, state, head, max_attempts, created_at, scheduled_at)
			VALUES (1, 'k', 'r', 'available', 1, 1, ?1, ?1)`,
		`UPDATE jobs SET state = 'running', attempt = 1, attempted_at = ?1, worker = 'w', token = 2, lease_expires_at = ?1 + ?2`,
		`UPDATE counters SET value = 2 WHERE name = 'token'`,
	} {
		if _, err := db.ExecContext(ctx, q, now, hour); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
