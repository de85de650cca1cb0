// Command cluster-lifecycle is the example of docs/guides/cluster-lifecycle.md: a control plane
// on PostgreSQL and database/sql that creates and scales clusters with Baton's job queue instead
// of a hand-built job_locks table, a janitor and an SQS FIFO queue.
//
// It inserts each cluster's row and submits its jobs in one *sql.Tx (so there is never a row
// without its job, nor a job without its row), runs the jobs with a worker (one at a time per
// cluster, behind a state guard: create from PENDING, scale from READY), writes to the cluster
// row only with a fencing token newer than the last one it saw, and ends with two dead letters:
// a permanent failure and a job the guard refused. run.sh runs it on a fresh schema.
//
//	cluster-lifecycle -dsn postgres://... -schema NAME        run the example
//	cluster-lifecycle -dsn postgres://... -schema NAME -drop  drop the schema
//	cluster-lifecycle -dsn postgres://... -ping               exit 0 if PostgreSQL answers
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", which SubmitTx accepts

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/postgres"
)

func main() {
	dsn := flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	schema := flag.String("schema", "", "schema for the example's tables and Baton's (created if missing)")
	drop := flag.Bool("drop", false, "drop the schema and exit")
	ping := flag.Bool("ping", false, "exit 0 if PostgreSQL answers, 1 if not")
	flag.Parse()
	if *ping {
		if err := pingDB(*dsn); err != nil {
			fmt.Fprintln(os.Stderr, "cluster-lifecycle:", err)
			os.Exit(1)
		}
		return
	}
	if *schema == "" {
		fmt.Fprintln(os.Stderr, "cluster-lifecycle: -schema is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var err error
	if *drop {
		err = dropSchema(ctx, *dsn, *schema)
	} else {
		err = run(ctx, *dsn, *schema)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster-lifecycle:", err)
		os.Exit(1)
	}
}

// withSearchPath returns dsn with the connection's search_path set to schema, so that the
// application's own SQL names its tables unqualified.
func withSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func pingDB(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func dropSchema(ctx context.Context, dsn, schema string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// The job kinds and their state guards: the transitions the old design enforced by hand.
var kinds = []baton.Kind{
	{Name: "cluster.create", MaxAttempts: 3, Timeout: time.Minute,
		FromStates: []string{"", "PENDING"}, RunningState: "CREATING", SuccessState: "READY", FailureState: "FAILED"},
	{Name: "cluster.scale", MaxAttempts: 3, Timeout: time.Minute,
		FromStates: []string{"READY"}, RunningState: "SCALING", SuccessState: "READY", FailureState: "FAILED"},
}

func run(ctx context.Context, dsn, schema string) error {
	// Baton's tables live in the same schema as the application's (any schema would do).
	st, err := postgres.Open(ctx, dsn, postgres.Config{Schema: schema})
	if err != nil {
		return err
	}
	defer st.Close()
	appDSN, err := withSearchPath(dsn, schema)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", appDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS clusters (
		id text PRIMARY KEY, workers int NOT NULL, fence bigint NOT NULL DEFAULT 0)`); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: kinds, Logger: quiet})
	if err != nil {
		return err
	}

	// 1. A cluster row and its jobs in one transaction: rolled back, neither exists.
	if _, err := createCluster(ctx, db, q, "c0", 3, 5, false); err != nil {
		return err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM clusters WHERE id = 'c0'").Scan(&n); err != nil {
		return err
	}
	page, err := q.ListJobs(ctx, baton.JobListParams{Resource: "cluster/c0"})
	if err != nil {
		return err
	}
	fmt.Printf("rolled back: cluster c0 has %d rows and %d jobs\n", n, len(page.Jobs))

	// 2. Committed: the row and the jobs. c1 is created then scaled; c2 too, in parallel with
	// c1; c3's scale asks for a negative size (a permanent failure), and a later scale of c3 is
	// refused by the guard because the failure left c3 FAILED.
	for _, c := range []struct {
		id             string
		workers, scale int
	}{{"c1", 3, 5}, {"c2", 3, 4}, {"c3", 3, -1}} {
		ids, err := createCluster(ctx, db, q, c.id, c.workers, c.scale, true)
		if err != nil {
			return err
		}
		fmt.Printf("committed: cluster %s row with jobs %d (cluster.create) and %d (cluster.scale)\n", c.id, ids[0], ids[1])
	}
	late, err := q.Submit(ctx, baton.SubmitParams{Kind: "cluster.scale", Resource: "cluster/c3", Args: json.RawMessage(`{"workers":6}`)})
	if err != nil {
		return err
	}

	// 3. The worker: handlers for both kinds, one job at a time per cluster.
	h := &handlers{db: db, running: map[string]bool{}}
	backoff, err := baton.ExponentialBackoff(100*time.Millisecond, time.Second)
	if err != nil {
		return err
	}
	w, err := q.NewWorker(baton.WorkerConfig{Concurrency: 4, Backoff: backoff, Logger: quiet,
		Handlers: map[string]baton.Handler{"cluster.create": h.create, "cluster.scale": h.scale}})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	if err := waitIdle(ctx, q); err != nil {
		return err
	}
	if err := w.Stop(ctx); err != nil {
		return err
	}

	// 4. What happened.
	fmt.Printf("overlapping jobs on one cluster: %d\n", h.overlaps())
	for _, id := range []string{"c1", "c2", "c3"} {
		r, err := q.Resource(ctx, "cluster/"+id)
		if err != nil {
			return err
		}
		var workers int
		if err := db.QueryRowContext(ctx, "SELECT workers FROM clusters WHERE id = $1", id).Scan(&workers); err != nil {
			return err
		}
		fmt.Printf("cluster %s: %s, %d workers\n", id, r.State, workers)
	}
	page, err = q.ListJobs(ctx, baton.JobListParams{State: baton.JobDiscarded})
	if err != nil {
		return err
	}
	dead := page.Jobs
	for _, j := range dead {
		e := j.Errors[len(j.Errors)-1]
		fmt.Printf("dead letter: job %d %s %s after %d attempt(s): %s: %s\n", j.ID, j.Kind, j.Resource, j.Attempt, e.Code, e.Message)
	}
	if len(dead) != 2 || dead[1].ID != late.Job.ID {
		return fmt.Errorf("%d dead letters, want 2 (the last one job %d)", len(dead), late.Job.ID)
	}
	return nil
}

// createCluster inserts the cluster's row and submits its create and scale jobs in one
// database/sql transaction, and commits it or rolls it back. It returns the jobs' IDs.
func createCluster(ctx context.Context, db *sql.DB, q *baton.Queue, id string, workers, scaleTo int, commit bool) ([2]int64, error) {
	var ids [2]int64
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return ids, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO clusters (id, workers) VALUES ($1, $2)", id, workers); err != nil {
		return ids, err
	}
	for i, p := range []baton.SubmitParams{
		{Kind: "cluster.create", Resource: "cluster/" + id, IdempotencyKey: "create:" + id},
		{Kind: "cluster.scale", Resource: "cluster/" + id, Args: json.RawMessage(fmt.Sprintf(`{"workers":%d}`, scaleTo))},
	} {
		res, err := q.SubmitTx(ctx, tx, p) // the job exists if and only if tx commits
		if err != nil {
			return ids, err
		}
		ids[i] = res.Job.ID
	}
	if !commit {
		return ids, tx.Rollback()
	}
	return ids, tx.Commit()
}

// handlers run the jobs. They record which clusters have a job running, to show that Baton
// never runs two at once on one cluster.
type handlers struct {
	db *sql.DB

	mu        sync.Mutex
	running   map[string]bool
	overlap   int
	throttled bool
}

func (h *handlers) enter(cluster string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[cluster] {
		h.overlap++
	}
	h.running[cluster] = true
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.running, cluster)
	}
}

func (h *handlers) overlaps() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.overlap
}

func (h *handlers) create(ctx context.Context, job *baton.Job) error {
	defer h.enter(job.Resource)()
	fmt.Printf("%s: create (attempt %d, fencing token %d)\n", job.Resource, job.Attempt, job.Token)
	time.Sleep(100 * time.Millisecond) // the cloud calls
	return h.write(ctx, job, -1)
}

func (h *handlers) scale(ctx context.Context, job *baton.Job) error {
	defer h.enter(job.Resource)()
	var args struct{ Workers int }
	if err := json.Unmarshal(job.Args, &args); err != nil {
		return baton.Permanent(err)
	}
	if args.Workers < 0 {
		return baton.Permanent(fmt.Errorf("invalid worker count %d", args.Workers)) // no retry
	}
	h.mu.Lock()
	throttle := !h.throttled && job.Resource == "cluster/c1"
	h.throttled = h.throttled || throttle
	h.mu.Unlock()
	if throttle { // a transient error: retried after the backoff
		fmt.Printf("%s: scale to %d (attempt %d): cloud API throttled, will retry\n", job.Resource, args.Workers, job.Attempt)
		return errors.New("cloud API throttled (429)")
	}
	fmt.Printf("%s: scale to %d (attempt %d, fencing token %d)\n", job.Resource, args.Workers, job.Attempt, job.Token)
	time.Sleep(100 * time.Millisecond)
	return h.write(ctx, job, args.Workers)
}

// write updates the cluster's row only if the job's fencing token is newer than the last one
// that wrote it: a worker that stalled past its lease cannot overwrite a newer job's work.
func (h *handlers) write(ctx context.Context, job *baton.Job, workers int) error {
	res, err := h.db.ExecContext(ctx, `UPDATE clusters SET fence = $1,
		workers = CASE WHEN $2::int >= 0 THEN $2::int ELSE workers END
		WHERE id = $3 AND fence < $1`, int64(job.Token), workers, job.Resource[len("cluster/"):])
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return baton.Permanent(fmt.Errorf("stale fencing token %d: a newer job wrote %s", job.Token, job.Resource))
	}
	return nil
}

// waitIdle polls until no job is left unfinished.
func waitIdle(ctx context.Context, q *baton.Queue) error {
	for {
		counts, err := q.Counts(ctx)
		if err != nil {
			return err
		}
		if len(counts) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jobs still unfinished: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
