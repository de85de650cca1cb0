package postgres_test

import (
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/batonhq/baton/store"
)

// A job beyond one key submitted in a database/sql transaction (pgx's stdlib driver): its mode,
// extra resources and limits (its kind's templates filled) are stored and read back.
func TestJobsBeyondSubmitSQLTx(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k", Mode: store.ModeShared, Limits: []string{"zone/{args.zone}"}})
	setLimit(t, s, "zone/eu", 1)
	setLimit(t, s, "cap", 1)
	db, err := sql.Open("pgx", dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := s.SubmitJobSQLTx(ctx, tx, &store.SubmitParams{Kind: "k", Resource: "a", Args: []byte(`{"zone":"eu"}`),
		Resources: []string{"b"}, Limits: []string{"cap"}})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Job
	if !j.Shared || len(j.Resources) != 1 || j.Resources[0] != "b" || len(j.Limits) != 2 || j.Limits[0] != "cap" || j.Limits[1] != "zone/eu" {
		t.Fatalf("job %+v; want shared, resources [b], limits [cap zone/eu]", j)
	}
	if _, err := s.SubmitJobSQLTx(ctx, tx, &store.SubmitParams{Kind: "k", Resource: "c", Args: []byte(`{"zone":"us"}`)}); err == nil {
		t.Fatal("a submit whose template names an unknown limit was accepted")
	}
	// The refusal wrote nothing: the caller's transaction commits the first job only.
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if js, err := s.ListJobs(ctx, &store.JobListParams{Resource: "c", Limit: 10}); err != nil || len(js) != 0 {
		t.Fatalf("jobs on c: %v %v; want none", js, err)
	}
	got, err := s.GetJob(ctx, res.Job.ID)
	if err != nil || !got.Shared || len(got.Resources) != 1 || len(got.Limits) != 2 {
		t.Fatalf("job read back: %+v %v", got, err)
	}
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 1 || js[0].ID != got.ID {
		t.Fatalf("claimed %v; want job %d", js, got.ID)
	}
}
