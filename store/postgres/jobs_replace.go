package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// Latest wins (store.PolicyReplace, store/jobs_replace.go): the statements a replace submit runs
// after its insert, in its transaction, with its resource's row locked by lockResource (so that
// concurrent replace submits on one resource run one after the other, each seeing the job the
// one before inserted). $1 resource, $2 kind, $3 the new job.
//
// The end of an attempt locks its job's row, then its resource's, then the next job's (the
// promotion; a claim of a guarded kind and a cancel lock the job's, then the resource's). A
// replace submit keeps that order as far as it can: it locks the running jobs of its kind on its
// resource (lockReplacedSQL) before lockResource, the attempts it will most often ask to stop.
// The other rows it changes (a job claimed since, the queued jobs it supersedes) it can lock only
// after the resource's row, while another path may hold one of them and wait for the resource's:
// so, in a transaction of its own (submitSlow), it takes them without waiting
// (lockReplacedNowaitSQL) and, if one is taken, starts again (errReplaceRaced), which frees the
// resource's row for the other path. In a caller's transaction (SubmitJobTx), or on the last
// try, it waits: PostgreSQL refuses one side of a deadlock, if one comes.

// lockReplacedSQL locks the running jobs of kind $2 on resource $1.
const lockReplacedSQL = `SELECT j.id FROM {jobs} j WHERE j.resource = $1 AND j.kind = $2 AND j.state = 'running' FOR UPDATE`

// lockReplacedNowaitSQL locks the unfinished jobs of kind $2 on resource $1, or fails at once
// (55P03) if another transaction holds one.
const lockReplacedNowaitSQL = `SELECT count(*)::int FROM (
	SELECT j.id FROM {jobs} j WHERE j.resource = $1 AND j.kind = $2 AND j.state IN ` + unfinished + ` FOR UPDATE NOWAIT
) x`

// errReplaceRaced: a replace submit found a row it changes locked (see above); submitSlow tries
// again.
var errReplaceRaced = errors.New("postgres: a job a replace submit changes is locked; try again")

// raced maps a NOWAIT lock's refusal (55P03) to errReplaceRaced.
func raced(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return errReplaceRaced
	}
	return err
}

// retryTx is submitSlow's transaction: a submit in it may fail with errReplaceRaced (but on the
// last try), to be tried again.
type retryTx struct {
	pgx.Tx
	last bool
}

// The statements below lock the rows they change with "{nowait}": NOWAIT in submitSlow's
// transaction (errReplaceRaced on a row another transaction holds), nothing elsewhere.

// askRunningToStopSQL asks the running job of the kind on the resource to stop, naming the job
// that replaces it (its attempt ends superseded: finishSQL).
const askRunningToStopSQL = `UPDATE {jobs} j SET cancel_requested = true, superseded_by = $3
WHERE j.id IN (SELECT u.id FROM {jobs} u WHERE u.resource = $1 AND u.kind = $2 AND u.state = 'running' AND u.id <> $3
	FOR UPDATE{nowait})`

// supersedeSQL ends the unfinished jobs of the kind on the resource that are not running as
// superseded by $3; a head that had an attempt applies its kind's failure state, as a cancel does
// (cancelSQL), and those with holds leave their lines (their tickets, lease ID store.JobLeaseID).
// It returns how many it ended.
const supersedeSQL = `WITH old AS (
	SELECT j.id FROM {jobs} j
	WHERE j.resource = $1 AND j.kind = $2 AND j.state IN ('scheduled', 'available', 'retryable') AND j.id <> $3
	ORDER BY j.id FOR UPDATE{nowait}
), res AS (
	UPDATE {resources} r SET state = k.failure_state, version = r.version + 1, updated_at = now()
	FROM {jobs} j JOIN {kinds} k ON k.name = j.kind
	WHERE j.id IN (SELECT id FROM old) AND r.key = j.resource AND j.head AND j.attempt > 0
		AND k.failure_state <> '' AND r.state <> k.failure_state
	RETURNING r.key
), upd AS (
	UPDATE {jobs} j SET state = 'superseded', superseded_by = $3, head = false, finished_at = now()
	FROM old
	WHERE j.id = old.id AND (SELECT count(*) FROM res) >= 0
	RETURNING j.id, j.holds
), tk AS (
	DELETE FROM {tickets} t WHERE t.lease_id IN (SELECT {jobkey} || u.id FROM upd u WHERE u.holds)
)
SELECT count(*)::int FROM upd`

// supersede applies the replace policy for n, the job just inserted (see supersedeSQL), promotes
// the resource's next job if the head was superseded, and returns n as it is now and how many jobs
// it ended (store.SubmitResult.Superseded).
func (s *Store) supersede(ctx context.Context, q querier, n *store.Job) (*store.Job, int, error) {
	ask, sup := s.jq.askRunningToStop, s.jq.supersede
	if rt, ok := q.(retryTx); ok && !rt.last {
		ask, sup = s.jq.askRunningToStopNowait, s.jq.supersedeNowait
	}
	if _, err := q.Exec(ctx, ask, n.Resource, n.Kind, n.ID); err != nil {
		return nil, 0, raced(err)
	}
	var ended int
	if err := q.QueryRow(ctx, sup, n.Resource, n.Kind, n.ID).Scan(&ended); err != nil {
		return nil, 0, raced(err)
	}
	if ended == 0 {
		return n, 0, nil
	}
	if _, err := q.Exec(ctx, s.jq.promoteFinished, n.ID); err != nil {
		return nil, 0, err
	}
	n, err := scanJob(q.QueryRow(ctx, s.jq.get, n.ID))
	return n, ended, err
}

// existing is the answer to a submit whose idempotency key names job j: j, or the job that
// replaced it (store.FollowReplacements).
func (s *Store) existing(ctx context.Context, q querier, j *store.Job) (*store.SubmitResult, error) {
	j, err := store.FollowReplacements(j, func(id int64) (*store.Job, error) {
		next, err := scanJob(q.QueryRow(ctx, s.jq.get, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		return next, err
	})
	if err != nil {
		return nil, err
	}
	return &store.SubmitResult{Job: j, Existing: true}, nil
}
