package baton_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// SubmitTx on PostgreSQL in a database/sql transaction (pgx's stdlib driver): the job and the
// caller's own row change commit together or not at all, and a committed job is claimable.
func TestSubmitTxPostgresDatabaseSQL(t *testing.T) {
	ctx := testCtx(t)
	st := openPostgres(t)
	schema := st.Schema()
	q := newQueue(t, st, baton.Kind{Name: "cluster.scale", FromStates: []string{"READY"}, RunningState: "SCALING",
		SuccessState: "READY", FailureState: "FAILED"})
	db, err := sql.Open("pgx", postgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clusters := pgx.Identifier{schema, "clusters"}.Sanitize()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+clusters+" (id text PRIMARY KEY, workers int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	submit := func(id string, commit bool) *baton.Job {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+clusters+" (id, workers) VALUES ($1, 3)", id); err != nil {
			t.Fatal(err)
		}
		res, err := q.SubmitTx(ctx, tx, baton.SubmitParams{Kind: "cluster.scale", Resource: "cluster/" + id,
			Args: []byte(`{"workers":5}`), IdempotencyKey: "scale-" + id})
		if err != nil {
			t.Fatalf("SubmitTx(*sql.Tx): %v", err)
		}
		if res.Existing || res.Job.ID <= 0 || res.Job.State != store.JobAvailable || string(res.Job.Args) != `{"workers": 5}` {
			t.Fatalf("SubmitTx(*sql.Tx) = %+v (existing %v)", res.Job, res.Existing)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return res.Job
	}

	gone := submit("c1", false)
	if _, err := q.Get(ctx, gone.ID); err == nil {
		t.Fatalf("job %d exists after a rollback", gone.ID)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+clusters).Scan(&n); err != nil || n != 0 {
		t.Fatalf("clusters after a rollback: %d, %v", n, err)
	}
	if page, err := q.ListJobs(ctx, baton.JobListParams{}); err != nil || len(page.Jobs) != 0 {
		t.Fatalf("jobs after a rollback: %+v, %v", page, err)
	}

	j := submit("c2", true)
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+clusters+" WHERE id = 'c2'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("cluster row after a commit: %d, %v", n, err)
	}
	if _, err := st.SetResourceState(ctx, &store.SetResourceStateParams{Key: "cluster/c2", State: "READY"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"cluster.scale"}, Limit: 5, TTL: 10 * time.Second})
	if err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("claim after a commit: %v, %v (want job %d)", got, err, j.ID)
	}

	// The same idempotency key in a later transaction returns the committed job.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.SubmitTx(ctx, tx, baton.SubmitParams{Kind: "cluster.scale", Resource: "cluster/c2", IdempotencyKey: "scale-c2"})
	_ = tx.Rollback()
	if err != nil || !res.Existing || res.Job.ID != j.ID || res.Job.State != store.JobRunning {
		t.Fatalf("resubmit with the key: %+v, %v", res, err)
	}
}

// The busy policies through a database/sql transaction: skip records a skipped job with its
// reason, reject refuses with a *ResourceBusyError naming the job in the way.
func TestSubmitTxPostgresDatabaseSQLPolicies(t *testing.T) {
	ctx := testCtx(t)
	st := openPostgres(t)
	q := newQueue(t, st, baton.Kind{Name: "k"})
	db, err := sql.Open("pgx", postgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	submit := func(p baton.SubmitParams) (*baton.SubmitResult, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := q.SubmitTx(ctx, tx, p)
		if err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		return res, tx.Commit()
	}
	first, err := submit(baton.SubmitParams{Kind: "k", Resource: "r"})
	if err != nil {
		t.Fatal(err)
	}
	skipped, err := submit(baton.SubmitParams{Kind: "k", Resource: "r", Policy: baton.PolicySkip})
	if err != nil || skipped.Job.State != baton.JobSkipped || len(skipped.Job.Errors) != 1 ||
		skipped.Job.Errors[0].Code != store.CodeResourceBusy {
		t.Fatalf("skip policy: %+v, %v", skipped, err)
	}
	_, err = submit(baton.SubmitParams{Kind: "k", Resource: "r", Policy: baton.PolicyReject})
	var busy *baton.ResourceBusyError
	if !errors.As(err, &busy) || busy.HeadJob != first.Job.ID {
		t.Fatalf("reject policy: %v", err)
	}
	if _, err := submit(baton.SubmitParams{Kind: "nope", Resource: "r"}); !isInvalid(err, "kind") {
		t.Fatalf("unknown kind: %v", err)
	}
	if page, err := q.ListJobs(ctx, baton.JobListParams{Resource: "r"}); err != nil || len(page.Jobs) != 2 {
		t.Fatalf("jobs on r: %+v, %v (want the first and the skipped one)", page, err)
	}
}
