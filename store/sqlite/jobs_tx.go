package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// querier is what the job code needs of a transaction: *sql.Tx, whether the store's own or a
// caller's (SubmitJobTx).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// jobTx is one job operation's transaction: its clock reading (taken once the write lock is
// held), the kinds and resources it has read, and the kinds to wake after it commits.
type jobTx struct {
	ctx   context.Context
	q     querier
	now   time.Time
	kinds map[string]*store.Kind
	res   map[string]*resourceRow
	wake  map[string]bool
	// freed holds the resources whose running attempt ended: this process's lock waiters on them
	// are woken once the transaction commits.
	freed map[string]bool
	// heads, set for a batch submit only (in which nothing else changes a head), remembers
	// each resource's head (nil: none) once read or made, instead of reading it per job.
	heads map[string]*store.Job
	// stmts, set for a batch submit only, holds the statements it runs per job, prepared once
	// (preparing costs more than running them).
	stmts map[string]*sql.Stmt
	// s is the store, set for the store's own transactions (inTx): a job with holds needs its
	// prepared statements (jobs_beyond.go).
	s *Store
	// reaping is set by the reaper: the attempts it ends are marked reaped (jobs.reaped), and the
	// audit log records their ends as the store's own, with no principal.
	reaping bool
}

// queryRow runs a statement that returns a row, through a prepared statement in a batch.
func (x *jobTx) queryRow(query string, args ...any) *sql.Row {
	if x.stmts == nil {
		return x.q.QueryRowContext(x.ctx, query, args...)
	}
	st, ok := x.stmts[query]
	if !ok {
		p, can := x.q.(interface {
			PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
		})
		if !can {
			return x.q.QueryRowContext(x.ctx, query, args...)
		}
		var err error
		if st, err = p.PrepareContext(x.ctx, query); err != nil {
			return x.q.QueryRowContext(x.ctx, query, args...) // the same error, as a row's
		}
		x.stmts[query] = st
	}
	return st.QueryRowContext(x.ctx, args...)
}

// closeStmts closes the batch's prepared statements.
func (x *jobTx) closeStmts() {
	for _, st := range x.stmts {
		_ = st.Close()
	}
}

func newJobTx(ctx context.Context, q querier, now time.Time) *jobTx {
	now = time.Unix(0, now.UnixNano()) // as it reads back from the file
	return &jobTx{ctx: ctx, q: q, now: now, kinds: map[string]*store.Kind{},
		res: map[string]*resourceRow{}, wake: map[string]bool{}, freed: map[string]bool{}}
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE: the write lock is taken at once, so
// the clock is read after it) and, once it commits, wakes this process's workers of the kinds fn
// made claimable. Errors of the store's contract pass through; others are wrapped.
func (s *Store) inTx(ctx context.Context, op string, fn func(x *jobTx) error) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(op, err)
	}
	x := newJobTx(ctx, tx, s.now())
	x.s = s
	if err := fn(x); err != nil {
		_ = tx.Rollback()
		return s.wrapJob(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(op, err)
	}
	s.wakeKinds(x.wake)
	for key := range x.freed {
		s.wakeFront(ctx, key)
	}
	return nil
}

func (s *Store) wakeKinds(kinds map[string]bool) {
	for k := range kinds {
		s.hub.Notify(notify.JobKey(k))
	}
}

// wrapJob passes the contract's errors through as they are and wraps the driver's.
func (s *Store) wrapJob(op string, err error) error {
	for _, e := range []error{store.ErrNotFound, store.ErrNotHeld, store.ErrResourceBusy, store.ErrJobState,
		store.ErrVersionMismatch, store.ErrInvalidArgument} {
		if errors.Is(err, e) {
			return err
		}
	}
	return s.wrap(op, err)
}

// Unfinished states, as SQL lists (constants, never user input).
const (
	sqlUnfinished = `('scheduled', 'available', 'running', 'retryable')`
	sqlClaimable  = `('scheduled', 'available', 'retryable')`
)

const jobColumns = `id, seq, kind, resource, args, state, head, attempt, max_attempts, priority,
	idempotency_key, errors, created_at, scheduled_at, attempted_at, finished_at, worker, token,
	lease_expires_at, cancel_requested, timeout_ns, owner, beyond, superseded_by, traceparent`

// storedError is a JobError as stored in jobs.errors: the time in Unix nanoseconds, like every
// other time in the file.
type storedError struct {
	Attempt int    `json:"attempt"`
	At      int64  `json:"at"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Until   int64  `json:"until,omitempty"` // CodeResourceCooldown
}

func unixOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func scanJob(sc interface{ Scan(...any) error }) (*store.Job, error) {
	var j store.Job
	var args, state, errs string
	var key sql.NullString
	var created, scheduled, token, timeout int64
	var attempted, finished, expires sql.NullInt64
	var beyond, traceParent sql.NullString
	if err := sc.Scan(&j.ID, &j.Seq, &j.Kind, &j.Resource, &args, &state, &j.Head, &j.Attempt, &j.MaxAttempts,
		&j.Priority, &key, &errs, &created, &scheduled, &attempted, &finished, &j.Worker, &token, &expires,
		&j.CancelRequested, &timeout, &j.Owner, &beyond, &j.SupersededBy, &traceParent); err != nil {
		return nil, err
	}
	j.TraceParent = traceParent.String
	if err := decodeBeyond(&j, beyond); err != nil {
		return nil, err
	}
	var stored []storedError
	if err := json.Unmarshal([]byte(errs), &stored); err != nil {
		return nil, err
	}
	for _, e := range stored {
		j.Errors = append(j.Errors, store.JobError{Attempt: e.Attempt, At: time.Unix(0, e.At), Code: e.Code, Message: e.Message,
			Until: unixOrZero(e.Until)})
	}
	j.Args, j.State, j.IdempotencyKey = json.RawMessage(args), store.JobState(state), key.String
	j.CreatedAt, j.ScheduledAt = time.Unix(0, created), time.Unix(0, scheduled)
	j.AttemptedAt, j.FinishedAt, j.LeaseExpiresAt = fromNull(attempted), fromNull(finished), fromNull(expires)
	j.Token, j.Timeout = uint64(token), time.Duration(timeout)
	return &j, nil
}

func fromNull(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}

func toNull(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func encodeErrors(errs []store.JobError) (string, error) {
	stored := make([]storedError, 0, len(errs))
	for _, e := range errs {
		se := storedError{Attempt: e.Attempt, At: e.At.UnixNano(), Code: e.Code, Message: e.Message}
		if !e.Until.IsZero() {
			se.Until = e.Until.UnixNano()
		}
		stored = append(stored, se)
	}
	b, err := json.Marshal(stored)
	return string(b), err
}

// scanJobs reads every row, then closes them (so that the transaction can run other statements).
func scanJobs(rows *sql.Rows, err error) ([]*store.Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// job reads one job; store.ErrNotFound if there is none.
func (x *jobTx) job(id int64) (*store.Job, error) {
	j, err := scanJob(x.q.QueryRowContext(x.ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return j, err
}

// runningJob reads the running attempt (id, token) of owner; store.ErrNotHeld if it names no
// running attempt of owner, whether the job is gone, not running, runs another attempt or
// another owner's. The caller's write transaction holds the write lock from this read to its
// write.
func (x *jobTx) runningJob(id int64, token uint64, owner string) (*store.Job, error) {
	j, err := scanJob(x.q.QueryRowContext(x.ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE id = ? AND token = ? AND owner = ? AND state = 'running'`, id, int64(token), owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotHeld
	}
	return j, err
}

// insertJob writes a new job and sets its ID.
func (x *jobTx) insertJob(j *store.Job) error {
	errs, err := encodeErrors(j.Errors)
	if err != nil {
		return err
	}
	key := sql.NullString{String: j.IdempotencyKey, Valid: j.IdempotencyKey != ""}
	beyond, err := encodeBeyond(j)
	if err != nil {
		return err
	}
	return x.queryRow(`INSERT INTO jobs (seq, kind, resource, args, state, head, attempt,
			max_attempts, priority, idempotency_key, errors, created_at, scheduled_at, finished_at, beyond, traceparent)
		VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		j.Seq, j.Kind, j.Resource, string(j.Args), string(j.State), j.Head, j.MaxAttempts, j.Priority, key, errs,
		j.CreatedAt.UnixNano(), j.ScheduledAt.UnixNano(), toNull(j.FinishedAt), beyond,
		sql.NullString{String: j.TraceParent, Valid: j.TraceParent != ""}).Scan(&j.ID)
}

// saveJob writes back every field a transition may change. reaped changes only when an attempt
// starts or ends: it tells the audit trigger whether the reaper ended it.
func (x *jobTx) saveJob(j *store.Job) error {
	errs, err := encodeErrors(j.Errors)
	if err != nil {
		return err
	}
	_, err = x.q.ExecContext(x.ctx, `UPDATE jobs SET seq = ?, state = ?, head = ?, attempt = ?, max_attempts = ?,
			errors = ?, scheduled_at = ?, attempted_at = ?, finished_at = ?, worker = ?, owner = ?, token = ?,
			lease_expires_at = ?, cancel_requested = ?, timeout_ns = ?,
			reaped = iif(state = 'running' OR ? = 'running', ?, reaped)
		WHERE id = ?`,
		j.Seq, string(j.State), j.Head, j.Attempt, j.MaxAttempts, errs, j.ScheduledAt.UnixNano(),
		toNull(j.AttemptedAt), toNull(j.FinishedAt), j.Worker, j.Owner, int64(j.Token), toNull(j.LeaseExpiresAt),
		j.CancelRequested, int64(j.Timeout), string(j.State), x.reaping, j.ID)
	return err
}

// next draws the next value of a counter row: 'job_seq', or 'token', the store-wide fencing
// sequence shared with leases (the lease triggers only ever raise it to a granted token, so a
// value drawn here is never granted to a lease, nor the other way round).
func (x *jobTx) next(counter string) (int64, error) {
	var v int64
	err := x.queryRow(`UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value`, counter).Scan(&v)
	return v, err
}

func (x *jobTx) addError(j *store.Job, code, msg string) {
	j.Errors = append(j.Errors, store.JobError{Attempt: j.Attempt, At: x.now, Code: code, Message: store.TruncateMessage(msg)})
}
