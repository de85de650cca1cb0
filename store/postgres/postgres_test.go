package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/storetest"
)

// TestMain fails the package if any goroutine (a LISTEN dispatcher, a pool's health checker)
// outlives the stores that started it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func dsn() string {
	if v := os.Getenv("BATON_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return defaultDSN
}

// hangGuard bounds a test's waits for a condition (a wake-up, a reconnect): only a hang reaches
// it, never a loaded machine.
const hangGuard = 3 * time.Minute

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// newSchema names a fresh schema and drops it when the test ends, after the stores on it (which
// are closed by cleanups registered later, so run earlier).
func newSchema(t testing.TB) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "bt_" + hex.EncodeToString(b)
	t.Cleanup(func() { exec(t, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// withConn runs fn on a connection of its own, outside any store.
func withConn(t testing.TB, fn func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if err := fn(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// exec runs one statement on a connection of its own.
func exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		return nil
	})
}

// queryInt runs a one-value query on a connection of its own.
func queryInt(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		return nil
	})
	return n
}

func openStore(t testing.TB, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(testCtx(t), dsn(), postgres.Config{Schema: schema, Audit: true})
	if err != nil {
		t.Fatalf("Open(%q): %v", schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func leasesTable(schema string) string { return pgx.Identifier{schema, "leases"}.Sanitize() }

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{NewBackend: func(t testing.TB) storetest.Backend {
		schema := newSchema(t)
		return storetest.Backend{
			Open: func(t testing.TB) store.Store { return openStore(t, schema) },
			DeleteRow: func(t testing.TB, key string) {
				exec(t, "DELETE FROM "+leasesTable(schema)+" WHERE key = $1", key)
			},
		}
	}})
}

func acquireParams(key, holder string) *store.AcquireParams {
	return &store.AcquireParams{Key: key, LeaseID: holder + "-" + randHex(), Holder: holder, TTL: time.Minute}
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func wantWake(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(hangGuard):
		t.Fatalf("no wake-up %s after %s (hung)", hangGuard, what)
	}
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s := openStore(t, schema)

	md := json.RawMessage(`{"job": "deploy-42","n":1}`)
	p := acquireParams("svc/api", "job-7")
	p.Metadata = md
	p.Cooldown = time.Hour
	a, err := s.Acquire(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != p.LeaseID || a.Holder != "job-7" || a.Token == 0 || a.TTLLeft <= 55*time.Second || a.TTLLeft > time.Minute {
		t.Fatalf("Acquire = %+v", a)
	}
	var gotMD, wantMD any
	if err := json.Unmarshal(a.Metadata, &gotMD); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(md, &wantMD)
	if fmt.Sprint(gotMD) != fmt.Sprint(wantMD) {
		t.Fatalf("metadata %s, want %s", a.Metadata, md)
	}

	// Same holder: same lease, renewed; no token drawn.
	again := acquireParams("svc/api", "job-7")
	again.TTL = 2 * time.Minute
	b, err := s.Acquire(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != a.ID || b.Token != a.Token || !b.AcquiredAt.Equal(a.AcquiredAt) || !b.ExpiresAt.After(a.ExpiresAt) || len(b.Metadata) == 0 {
		t.Fatalf("re-acquire = %+v, want lease %s renewed", b, a.ID)
	}

	// Another holder: held, with who and until when.
	_, err = s.Acquire(ctx, acquireParams("svc/api", "job-8"))
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Holder != "job-7" || held.Token != a.Token || !held.ExpiresAt.Equal(b.ExpiresAt) ||
		held.RetryAfter <= time.Minute || held.RetryAfter > 2*time.Minute {
		t.Fatalf("Acquire by another holder: %v (%+v)", err, held)
	}

	r, err := s.Renew(ctx, &store.RenewParams{Key: "svc/api", LeaseID: a.ID, TTL: 30 * time.Second})
	if err != nil || r.Token != a.Token || r.TTLLeft > 30*time.Second || r.TTLLeft < 25*time.Second {
		t.Fatalf("Renew = %+v, %v", r, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "svc/api", LeaseID: "other", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("Renew by another ID: %v", err)
	}

	res, err := s.Release(ctx, &store.ReleaseParams{Key: "svc/api", LeaseID: a.ID})
	if err != nil || res.AlreadyReleased {
		t.Fatalf("Release = %+v, %v", res, err)
	}
	res, err = s.Release(ctx, &store.ReleaseParams{Key: "svc/api", LeaseID: a.ID})
	if err != nil || !res.AlreadyReleased {
		t.Fatalf("second Release = %+v, %v", res, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "svc/api", LeaseID: a.ID, TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("Renew after release: %v", err)
	}
	if _, err := s.Get(ctx, "svc/api"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after release: %v", err)
	}
	// The row stays as a tombstone so the next grant's token is drawn under its lock.
	if n := queryInt(t, "SELECT count(*) FROM "+leasesTable(schema)+" WHERE key = 'svc/api' AND ended = 1"); n != 1 {
		t.Fatalf("%d released rows for the key, want the tombstone", n)
	}

	// Cooldown after a clean release, measured on the database clock.
	_, err = s.Acquire(ctx, acquireParams("svc/api", "job-8"))
	var cd *store.RestingError
	if !errors.As(err, &cd) || cd.Reason != store.ReasonCooldown || cd.Remaining <= 59*time.Minute || cd.Remaining > time.Hour {
		t.Fatalf("Acquire in cooldown: %v", err)
	}
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, newSchema(t))

	p := acquireParams("db/primary", "stuck")
	p.LockDelay = 10 * time.Minute
	a, err := s.Acquire(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "db/primary", Reason: "wedged"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != a.ID || got.Token != a.Token || !got.ExpiresAt.Equal(a.ExpiresAt) || got.TTLLeft <= 50*time.Second {
		t.Fatalf("ForceRelease returned %+v, want the lease as it was: %+v", got, a)
	}
	if _, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "db/primary", Reason: "again"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second ForceRelease: %v, want ErrNotFound", err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "db/primary", LeaseID: a.ID}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("Release after force-release: %v, want ErrNotHeld", err)
	}
	_, err = s.Acquire(ctx, acquireParams("db/primary", "next"))
	var cd *store.RestingError
	if !errors.As(err, &cd) || cd.Reason != store.ReasonLockDelay || cd.Remaining <= 9*time.Minute || cd.Remaining > 10*time.Minute {
		t.Fatalf("Acquire during lock delay: %v", err)
	}
	// The former holder is refused too: the delay protects against its own in-flight writes.
	if _, err := s.Acquire(ctx, acquireParams("db/primary", "stuck")); !errors.Is(err, store.ErrResting) {
		t.Fatalf("former holder during lock delay: %v", err)
	}
	if _, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "db/primary"}); !isInvalid(err, "reason") {
		t.Fatalf("ForceRelease without reason: %v", err)
	}
}

func isInvalid(err error, field string) bool {
	var inv *store.InvalidArgumentError
	return errors.As(err, &inv) && inv.Field == field
}

func TestInvalidArgumentsWriteNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s := openStore(t, schema)

	cases := []struct {
		field string
		p     *store.AcquireParams
	}{
		{"key", &store.AcquireParams{Key: "", LeaseID: "id", Holder: "h", TTL: time.Minute}},
		{"key", &store.AcquireParams{Key: "a\x00b", LeaseID: "id", Holder: "h", TTL: time.Minute}},
		{"holder", &store.AcquireParams{Key: "k", LeaseID: "id", TTL: time.Minute}},
		{"ttl", &store.AcquireParams{Key: "k", LeaseID: "id", Holder: "h", TTL: time.Millisecond}},
		{"metadata", &store.AcquireParams{Key: "k", LeaseID: "id", Holder: "h", TTL: time.Minute, Metadata: json.RawMessage(`[1]`)}},
		// Valid JSON that jsonb cannot store: reported as a bad argument, not a store failure.
		{"metadata", &store.AcquireParams{Key: "k", LeaseID: "id", Holder: "h", TTL: time.Minute, Metadata: json.RawMessage(`{"a":"\u0000"}`)}},
		{"lock_delay", &store.AcquireParams{Key: "k", LeaseID: "id", Holder: "h", TTL: time.Minute, LockDelay: -time.Second}},
	}
	for _, c := range cases {
		if _, err := s.Acquire(ctx, c.p); !isInvalid(err, c.field) {
			t.Errorf("Acquire(%+v): %v, want invalid %s", c.p, err, c.field)
		}
	}
	if _, err := s.List(ctx, &store.ListParams{Limit: store.MaxListLimit + 1}); !isInvalid(err, "limit") {
		t.Errorf("List with a large limit: %v", err)
	}
	if _, err := s.Get(ctx, ""); !isInvalid(err, "key") {
		t.Errorf("Get(\"\"): %v", err)
	}
	if n := queryInt(t, "SELECT count(*) FROM "+leasesTable(schema)); n != 0 {
		t.Fatalf("%d rows written by invalid calls", n)
	}
}

func TestListIsLiteralAndByteOrdered(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, newSchema(t))
	for _, k := range []string{"a%b/1", "a_b/2", "axb/3", "a%", "B", "b", "é", "z"} {
		holder := "h1"
		if k == "axb/3" || k == "z" {
			holder = "h2"
		}
		if _, err := s.Acquire(ctx, acquireParams(k, holder)); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(p *store.ListParams) string {
		t.Helper()
		ls, err := s.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, l := range ls {
			ks = append(ks, l.Key)
		}
		return strings.Join(ks, " ")
	}
	// Byte order, as Go sorts: "B" < "a..." < "b" < "z" < "é".
	if got, want := keys(&store.ListParams{}), "B a% a%b/1 a_b/2 axb/3 b z é"; got != want {
		t.Errorf("List all = %q, want %q", got, want)
	}
	if got, want := keys(&store.ListParams{Prefix: "a%"}), "a% a%b/1"; got != want {
		t.Errorf("prefix a%% = %q, want %q", got, want)
	}
	if got, want := keys(&store.ListParams{Prefix: "a_"}), "a_b/2"; got != want {
		t.Errorf("prefix a_ = %q, want %q", got, want)
	}
	if got, want := keys(&store.ListParams{Holder: "h2"}), "axb/3 z"; got != want {
		t.Errorf("holder h2 = %q, want %q", got, want)
	}
	if got, want := keys(&store.ListParams{Prefix: "a", After: "a%b/1", Limit: 2}), "a_b/2 axb/3"; got != want {
		t.Errorf("page = %q, want %q", got, want)
	}
}

func TestInvalidSchema(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, name := range []string{"Baton", "1abc", "a-b", "a b", `a"b`, "a;drop", "pg_x", "é", strings.Repeat("a", 64)} {
		if _, err := postgres.Open(ctx, dsn(), postgres.Config{Schema: name}); !isInvalid(err, "schema") {
			t.Errorf("Open(%q): %v, want invalid schema", name, err)
		}
		if _, err := postgres.New(ctx, pool, postgres.Config{Schema: name}); !isInvalid(err, "schema") {
			t.Errorf("New(%q): %v, want invalid schema", name, err)
		}
		if err := postgres.Migrate(ctx, pool, name); !isInvalid(err, "schema") {
			t.Errorf("Migrate(%q): %v, want invalid schema", name, err)
		}
	}
}

// TestLongSchemaName: a 63-byte schema (the longest) still gets a NOTIFY channel of legal length,
// distinct from its neighbours', and wake-ups across stores work on it.
func TestLongSchemaName(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	base := newSchema(t)
	schema := base + strings.Repeat("x", 63-len(base))
	t.Cleanup(func() { exec(t, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	other := schema[:62] + "y"
	if c := postgres.ChannelName(schema); len(c) > 63 || c == postgres.ChannelName(other) {
		t.Fatalf("channel %q (%d bytes) for %q; %q for %q", c, len(c), schema, postgres.ChannelName(other), other)
	}
	s1, s2 := openStore(t, schema), openStore(t, schema)
	wake, cancel := s1.Subscribe("k")
	defer cancel()
	releaseWithWaiter(t, ctx, s2, s1, "k")
	wantWake(t, wake, "a release on another store")
}

func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(ctx, dsn(), postgres.Config{Schema: schema})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d: %v", i, err)
		}
	}
	versions := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	count := func() int64 { return queryInt(t, "SELECT count(*) FROM "+versions) }
	files, _ := os.ReadDir("migrations")
	if n := count(); n != int64(len(files)) || n == 0 {
		t.Fatalf("schema_migrations has %d rows after concurrent opens, want %d", n, len(files))
	}
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != int64(len(files)) {
		t.Fatalf("schema_migrations has %d rows after a second Migrate, want %d", n, len(files))
	}
	s := openStore(t, schema)
	if _, err := s.Acquire(ctx, acquireParams("k", "h")); err != nil {
		t.Fatal(err)
	}
}

func TestSkipMigrate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	if _, err := postgres.Open(ctx, dsn(), postgres.Config{Schema: schema, SkipMigrate: true}); err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Open with SkipMigrate on an empty schema: %v, want a request to migrate", err)
	}
	if n := queryInt(t, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema); n != 0 {
		t.Fatal("SkipMigrate created the schema")
	}
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(ctx, pool, postgres.Config{Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, acquireParams("k", "h")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// New does not own the pool: it still works after Close.
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("caller's pool after Close: %v", err)
	}
}

func TestNewRejectsTinyPool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pc, err := pgxpool.ParseConfig(dsn())
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := postgres.New(ctx, pool, postgres.Config{Schema: newSchema(t)}); !isInvalid(err, "pool") {
		t.Fatalf("New on a one-connection pool: %v, want invalid pool", err)
	}
	if _, err := postgres.New(ctx, nil, postgres.Config{}); !isInvalid(err, "pool") {
		t.Fatalf("New on a nil pool: %v, want invalid pool", err)
	}
}

func TestListenAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s1, s2 := openStore(t, schema), openStore(t, schema)
	elsewhere := openStore(t, newSchema(t))

	wake, cancel := s1.Subscribe("k")
	defer cancel()
	otherKey, cancelOther := s1.Subscribe("other")
	defer cancelOther()
	foreign, cancelForeign := elsewhere.Subscribe("k")
	defer cancelForeign()

	releaseWithWaiter(t, ctx, s2, s1, "k")
	wantWake(t, wake, "a release on another store")

	if _, err := s2.Acquire(ctx, acquireParams("k", "h")); err != nil {
		t.Fatal(err)
	}
	markWaiter(t, ctx, s1, "k")
	if _, err := s2.ForceRelease(ctx, &store.ForceReleaseParams{Key: "k", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	wantWake(t, wake, "a force-release on another store")

	// Both notifications have reached this server's listeners by now; neither was for these.
	select {
	case <-otherKey:
		t.Error("subscriber of another key was woken")
	case <-foreign:
		t.Error("subscriber in another schema was woken")
	default:
	}
}

func TestListenReconnects(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s1, s2 := openStore(t, schema), openStore(t, schema)
	wake, cancel := s1.Subscribe("k")
	defer cancel()

	pid, gen := postgres.ListenerPID(s1), postgres.ListenerConnects(s1)
	exec(t, "SELECT pg_terminate_backend($1)", int32(pid))
	deadline := time.Now().Add(hangGuard)
	for postgres.ListenerConnects(s1) == gen {
		if time.Now().After(deadline) {
			t.Fatalf("LISTEN connection not re-established in %s (hung)", hangGuard)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if postgres.ListenerPID(s1) == pid {
		t.Fatal("reconnected on the terminated backend's PID")
	}
	// Reconnecting wakes every subscriber, as notifications may have been missed meanwhile.
	wantWake(t, wake, "the LISTEN connection was replaced")

	releaseWithWaiter(t, ctx, s2, s1, "k")
	wantWake(t, wake, "a release on another store, after the reconnect")
}

// releaseWithWaiter acquires key on holder, has waiter make a refused waiting acquire of it (as
// Locker.Acquire does before it waits), and releases it on holder.
func releaseWithWaiter(t *testing.T, ctx context.Context, holder, waiter *postgres.Store, key string) {
	t.Helper()
	l, err := holder.Acquire(ctx, acquireParams(key, "h"))
	if err != nil {
		t.Fatal(err)
	}
	markWaiter(t, ctx, waiter, key)
	if _, err := holder.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
}

// markWaiter makes the refused, waiting acquire that Locker.Acquire makes before it waits: it
// flags the live lease on key so that its release sends a NOTIFY. Then it leaves the line.
func markWaiter(t *testing.T, ctx context.Context, s *postgres.Store, key string) {
	t.Helper()
	p := acquireParams(key, "waiter-"+randHex())
	p.Wait = true
	if _, err := s.Acquire(ctx, p); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("waiting acquire of a held key: %v, want ErrLockHeld", err)
	}
	// The waiter gives up its ticket (the line would refuse the next acquire); the flag stays.
	if err := s.LeaveLine(ctx, key, p.LeaseID, p.Owner); err != nil {
		t.Fatal(err)
	}
}

// A release nobody waits for sends no NOTIFY (NOTIFY serialises commits server-wide). Checked by
// order, not by a timeout: notifications enter the server's queue in commit order and the
// listener handles them in that order, so once the wake for a later, waited-for release has
// arrived, a NOTIFY from an earlier release would have arrived before it.
func TestReleaseWithoutWaitersSendsNoNotify(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	s1, s2 := openStore(t, schema), openStore(t, schema)
	quiet, cancelQuiet := s1.Subscribe("quiet")
	defer cancelQuiet()
	loud, cancelLoud := s1.Subscribe("loud")
	defer cancelLoud()

	q, err := s2.Acquire(ctx, acquireParams("quiet", "h"))
	if err != nil {
		t.Fatal(err)
	}
	// A refusal that will not wait (TryAcquire) does not flag the lease.
	if _, err := s1.Acquire(ctx, acquireParams("quiet", "not-waiting")); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("refusal: %v, want ErrLockHeld", err)
	}
	l, err := s2.Acquire(ctx, acquireParams("loud", "h"))
	if err != nil {
		t.Fatal(err)
	}
	markWaiter(t, ctx, s1, "loud")
	if got := queryInt(t, `SELECT count(*) FROM `+leasesTable(schema)+` WHERE waiters`); got != 1 {
		t.Fatalf("%d leases flagged as waited for, want 1 (loud)", got)
	}
	for _, rel := range []*store.ReleaseParams{{Key: "quiet", LeaseID: q.ID}, {Key: "loud", LeaseID: l.ID}} {
		if _, err := s2.Release(ctx, rel); err != nil {
			t.Fatal(err)
		}
	}
	wantWake(t, loud, "the release of a waited-for lease")
	select {
	case <-quiet:
		t.Fatal("the release of a lease nobody waited for sent a NOTIFY")
	default:
	}
}

// The pool's size: Config.MaxConns connections for statements plus LISTEN's, by default
// DefaultMaxConns() of them; a DSN's pool_max_conns is the whole pool, as before.
func TestPoolSize(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	with := func(param string) string {
		if strings.Contains(dsn(), "?") {
			return dsn() + "&" + param
		}
		return dsn() + "?" + param
	}
	for _, c := range []struct {
		dsn      string
		maxConns int
		want     int32
	}{
		{dsn(), 0, int32(postgres.DefaultMaxConns()) + 1},
		{dsn(), 3, 4},
		{dsn(), 40, 41},
		{with("pool_max_conns=6"), 0, 6},
		{with("pool_max_conns=6"), 7, 8}, // MaxConns wins
		{with("pool_max_conns=2"), 0, 4}, // at least four in all
	} {
		s, err := postgres.Open(ctx, c.dsn, postgres.Config{Schema: schema, MaxConns: c.maxConns})
		if err != nil {
			t.Fatal(err)
		}
		got := s.Pool().Config().MaxConns
		s.Close()
		if got != c.want {
			t.Errorf("Open(%q, MaxConns %d): pool of %d, want %d", c.dsn, c.maxConns, got, c.want)
		}
	}
	if postgres.DefaultMaxConns() < 8 {
		t.Errorf("DefaultMaxConns() = %d, want at least 8", postgres.DefaultMaxConns())
	}
	for _, bad := range []int{-1, postgres.MaxMaxConns + 1} {
		if _, err := postgres.Open(ctx, dsn(), postgres.Config{Schema: schema, MaxConns: bad}); !isInvalid(err, "max_conns") {
			t.Errorf("MaxConns %d: %v, want invalid max_conns", bad, err)
		}
	}
}
