package baton_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/sqlite"
)

// jobStore is what the job tests need of a backend: the job queue, and leases for the
// maintenance leader.
type jobStore interface {
	store.Store
	store.JobStore
}

// backend opens fresh, empty stores of one kind; every store opened by one backend value within
// a test shares the same database.
type backend struct {
	name string
	// open returns a new store on the test's database (the same one each call within a test).
	open func(t *testing.T) jobStore
}

// forEachBackend runs fn against SQLite, and against PostgreSQL when it is reachable (always
// under CI, where an unreachable PostgreSQL fails the test).
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "b.db")
		fn(t, backend{name: "sqlite", open: func(t *testing.T) jobStore {
			t.Helper()
			st, err := sqlite.Open(context.Background(), path, sqlite.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}})
	})
	t.Run("postgres", func(t *testing.T) {
		requirePostgres(t)
		schema := newPostgresSchema(t)
		fn(t, backend{name: "postgres", open: func(t *testing.T) jobStore {
			t.Helper()
			st, err := postgres.Open(context.Background(), postgresDSN(), postgres.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}})
	})
}

// openSQLite opens a store on a fresh SQLite file, for tests that need no other backend.
func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openPostgres opens a store on a fresh schema of the test PostgreSQL (skipping the test when
// it is unreachable, as requirePostgres does).
func openPostgres(t *testing.T) *postgres.Store {
	t.Helper()
	requirePostgres(t)
	st, err := postgres.Open(context.Background(), postgresDSN(), postgres.Config{Schema: newPostgresSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func postgresDSN() string {
	if v := os.Getenv("BATON_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	postgresOnce sync.Once
	postgresErr  error
)

// requirePostgres skips the test when PostgreSQL is unreachable, unless CI is set. Unreachable
// is refused at once; the bound is for a server that does not answer, and leaves a loaded one
// time to, so that load cannot turn the PostgreSQL tests into silent skips.
func requirePostgres(t *testing.T) {
	t.Helper()
	postgresOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, postgresDSN())
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		postgresErr = err
	})
	if postgresErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable under CI: %v", postgresErr)
		}
		t.Skipf("PostgreSQL unreachable: %v", postgresErr)
	}
}

// newPostgresSchema names a fresh schema and drops it when the test ends (after the stores on
// it, whose cleanups are registered later and so run first).
func newPostgresSchema(t *testing.T) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "bj_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, postgresDSN())
		if err != nil {
			t.Errorf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	return schema
}

// testCtx ends with the test, or after a minute: a hung test fails instead of timing out the
// package.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// quietLogger drops logs: the tests provoke warnings on purpose.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newQueue(t *testing.T, st store.JobStore, kinds ...baton.Kind) *baton.Queue {
	t.Helper()
	q, err := baton.NewQueue(testCtx(t), st, &baton.QueueConfig{Kinds: kinds, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func submit(t *testing.T, q *baton.Queue, p baton.SubmitParams) *baton.Job {
	t.Helper()
	res, err := q.Submit(testCtx(t), p)
	if err != nil {
		t.Fatalf("Submit(%+v): %v", p, err)
	}
	return res.Job
}

func getJob(t *testing.T, q *baton.Queue, id int64) *baton.Job {
	t.Helper()
	j, err := q.Get(testCtx(t), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return j
}

// runWorker runs w until the test ends (or stop is called) and checks that Run returned nil.
func runWorker(t *testing.T, w *baton.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Worker.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// ended collects OnJobEnd calls.
type ended struct {
	job     *baton.Job
	outcome baton.JobState
}

func endedChan(n int) (chan ended, func(*baton.Job, baton.JobState, time.Duration)) {
	ch := make(chan ended, n)
	return ch, func(j *baton.Job, o baton.JobState, _ time.Duration) { ch <- ended{j, o} }
}

func waitEnded(t *testing.T, ch <-chan ended) ended {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-testCtx(t).Done():
		t.Fatal("timed out waiting for a job to end")
		return ended{}
	}
}

// recv receives from ch, or fails the test if nothing comes within its context.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-testCtx(t).Done():
		t.Fatalf("timed out waiting on a %T", ch)
		panic("unreachable")
	}
}

// waitProgress waits for done while progress keeps moving: it fails the test only when progress
// stood still for a minute, so that a long run on a loaded machine (many jobs under -race) is not
// cut off while it is still getting somewhere, and a hung one still fails.
func waitProgress(t *testing.T, done <-chan struct{}, progress func() int64, what string) {
	t.Helper()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	last := progress()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			now := progress()
			if now == last {
				// Every goroutine's stack, so that a stall says where the worker waits.
				buf := make([]byte, 8<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("no progress for a minute: %d %s\ngoroutines:\n%s", now, what, buf)
			}
			last = now
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	err := fmt.Errorf("handler: %w", baton.Permanent(base))
	if !baton.IsPermanent(err) || !errors.Is(err, base) || err.Error() != "handler: bad input" {
		t.Fatalf("Permanent: IsPermanent=%v Is=%v %q", baton.IsPermanent(err), errors.Is(err, base), err)
	}
	var inv *baton.InvalidArgumentError
	if !errors.As(baton.Permanent(&baton.InvalidArgumentError{Field: "x"}), &inv) || inv.Field != "x" {
		t.Fatal("errors.As does not see through Permanent")
	}
	if baton.Permanent(nil) != nil || baton.IsPermanent(base) || baton.IsPermanent(nil) {
		t.Fatal("Permanent(nil) or IsPermanent of a plain error")
	}
}

func TestDefaultBackoff(t *testing.T) {
	for attempt := -1; attempt <= 100; attempt++ {
		want := baton.DefaultBackoffMax
		if attempt < 13 {
			want = min(baton.DefaultBackoffBase<<max(attempt-1, 0), baton.DefaultBackoffMax)
		}
		for range 20 {
			if d := baton.DefaultBackoff(attempt); d < want/2 || d > want {
				t.Fatalf("DefaultBackoff(%d) = %s, want in [%s, %s]", attempt, d, want/2, want)
			}
		}
	}
}

func TestQueueAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := testCtx(t)
		q := newQueue(t, b.open(t), baton.Kind{Name: "deploy", Policy: baton.PolicyReject})
		if _, err := q.Submit(ctx, baton.SubmitParams{Kind: "unknown", Resource: "r"}); !isInvalid(err, "kind") {
			t.Fatalf("submit of an unregistered kind: %v", err)
		}
		j := submit(t, q, baton.SubmitParams{Kind: "deploy", Resource: "svc/api", IdempotencyKey: "d-1", Args: []byte(`{"v":1}`)})
		if j.State != baton.JobAvailable || !j.Head {
			t.Fatalf("submitted %+v", j)
		}
		res, err := q.Submit(ctx, baton.SubmitParams{Kind: "deploy", Resource: "svc/api", IdempotencyKey: "d-1"})
		if err != nil || !res.Existing || res.Job.ID != j.ID {
			t.Fatalf("idempotent submit: %+v, %v", res, err)
		}
		var busy *baton.ResourceBusyError
		if _, err := q.Submit(ctx, baton.SubmitParams{Kind: "deploy", Resource: "svc/api"}); !errors.As(err, &busy) ||
			!errors.Is(err, baton.ErrResourceBusy) || busy.HeadJob != j.ID {
			t.Fatalf("reject policy: %v", err)
		}
		if page, err := q.ListJobs(ctx, baton.JobListParams{Resource: "svc/api"}); err != nil || len(page.Jobs) != 1 || page.Next != 0 {
			t.Fatalf("ListJobs: %+v, %v", page, err)
		}
		if c, err := q.Cancel(ctx, j.ID); err != nil || c.State != baton.JobCancelled {
			t.Fatalf("Cancel: %+v, %v", c, err)
		}
		var jse *baton.JobStateError
		if _, err := q.Cancel(ctx, j.ID); !errors.As(err, &jse) || !errors.Is(err, baton.ErrJobState) {
			t.Fatalf("second Cancel: %v", err)
		}
		if r, err := q.Retry(ctx, j.ID); err != nil || r.State != baton.JobAvailable {
			t.Fatalf("Retry: %+v, %v", r, err)
		}
		r, err := q.SetResourceState(ctx, baton.SetResourceStateParams{Key: "svc/api", State: "READY"})
		if err != nil || r.State != "READY" {
			t.Fatalf("SetResourceState: %+v, %v", r, err)
		}
		stale := r.Version - 1
		if _, err := q.SetResourceState(ctx, baton.SetResourceStateParams{Key: "svc/api", State: "X", IfVersion: &stale}); !errors.Is(err, baton.ErrVersionMismatch) {
			t.Fatalf("stale compare-and-set: %v", err)
		}
		if got, err := q.Resource(ctx, "svc/api"); err != nil || got.State != "READY" || got.Unfinished != 1 {
			t.Fatalf("Resource: %+v, %v", got, err)
		}
		if page, err := q.ListResources(ctx, baton.ResourceListParams{Prefix: "svc/"}); err != nil || len(page.Resources) != 1 || page.Next != "" {
			t.Fatalf("ListResources: %+v, %v", page, err)
		}
		if kinds, err := q.Kinds(ctx); err != nil || len(kinds) != 1 || kinds[0].MaxAttempts != store.DefaultMaxAttempts {
			t.Fatalf("Kinds: %+v, %v", kinds, err)
		}
		if n, err := q.Purge(ctx, baton.PurgeParams{}); err != nil || n != 0 {
			t.Fatalf("Purge: %d, %v", n, err)
		}
		if q.Store() == nil {
			t.Fatal("Store() is nil")
		}
	})
}

func TestNewQueueRegistersAllOrNone(t *testing.T) {
	st := openSQLite(t)
	_, err := baton.NewQueue(testCtx(t), st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "ok"}, {Name: "bad kind"}}})
	if !isInvalid(err, "kind") {
		t.Fatalf("NewQueue with a bad kind: %v", err)
	}
	if kinds, err := st.Kinds(testCtx(t)); err != nil || len(kinds) != 0 {
		t.Fatalf("kinds after a refused registration: %+v, %v", kinds, err)
	}
	if _, err := baton.NewQueue(testCtx(t), nil, nil); !isInvalid(err, "store") {
		t.Fatalf("NewQueue(nil store): %v", err)
	}
}

// SubmitTx on SQLite: the job exists if and only if the caller's transaction commits.
func TestSubmitTxSQLite(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "b.db")
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q := newQueue(t, st, baton.Kind{Name: "email"})
	db, err := sql.Open("sqlite", sqlite.DSN(path, sqlite.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := q.SubmitTx(ctx, tx, baton.SubmitParams{Kind: "email", Resource: "user/1"})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.Get(ctx, res.Job.ID)
		if commit != (err == nil) {
			t.Fatalf("commit=%v: Get after the transaction: %v", commit, err)
		}
	}
	if _, err := q.SubmitTx(ctx, "not a tx", baton.SubmitParams{Kind: "email", Resource: "user/1"}); !isInvalid(err, "tx") {
		t.Fatalf("SubmitTx with a string: %v", err)
	}
	if _, err := q.SubmitTx(ctx, nil, baton.SubmitParams{Kind: "email", Resource: "user/1"}); !isInvalid(err, "tx") {
		t.Fatalf("SubmitTx with nil: %v", err)
	}
}

// SubmitTx on PostgreSQL, in a pgx.Tx.
func TestSubmitTxPostgres(t *testing.T) {
	ctx := testCtx(t)
	st := openPostgres(t)
	q := newQueue(t, st, baton.Kind{Name: "email"})
	for _, commit := range []bool{false, true} {
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := q.SubmitTx(ctx, tx, baton.SubmitParams{Kind: "email", Resource: "user/1"})
		if err != nil {
			_ = tx.Rollback(ctx)
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.Get(ctx, res.Job.ID)
		if commit != (err == nil) {
			t.Fatalf("commit=%v: Get after the transaction: %v", commit, err)
		}
	}
	if _, err := q.SubmitTx(ctx, "not a tx", baton.SubmitParams{Kind: "email", Resource: "user/1"}); !isInvalid(err, "tx") {
		t.Fatalf("SubmitTx with a string on PostgreSQL: %v", err)
	}
}

func isInvalid(err error, field string) bool {
	var inv *baton.InvalidArgumentError
	return errors.As(err, &inv) && inv.Field == field
}
