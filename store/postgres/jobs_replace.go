package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// Latest wins (store.PolicyReplace, store/jobs_replace.go): the statements a replace submit runs
// after its insert, in its transaction, with its resource's row locked by lockResource (so that
// concurrent replace submits on one resource run one after the other, each seeing the job the
// one before inserted). $1 resource, $2 kind, $3 the new job.
//
// The end of an attempt locks its job's row, then its resource's, then the next job's (the
// promotion). A replace submit keeps that order: it locks the running job of its kind on its
// resource (lockReplacedSQL) before lockResource, and the queued jobs it supersedes after. A job
// that a claim started between those two locks is locked after the resource's row; if that
// deadlocks with the attempt's end, PostgreSQL refuses one of the two and a submit is retried
// (submitSlow).

// lockReplacedSQL locks the running job of kind $2 on resource $1.
const lockReplacedSQL = `SELECT j.id FROM {jobs} j WHERE j.resource = $1 AND j.kind = $2 AND j.state = 'running'
FOR UPDATE`

// askRunningToStopSQL asks the running job of the kind on the resource to stop, naming the job
// that replaces it (its attempt ends superseded: finishSQL).
const askRunningToStopSQL = `UPDATE {jobs} j SET cancel_requested = true, superseded_by = $3
WHERE j.resource = $1 AND j.kind = $2 AND j.state = 'running' AND j.id <> $3`

// supersedeSQL ends the unfinished jobs of the kind on the resource that are not running as
// superseded by $3; a head that had an attempt applies its kind's failure state, as a cancel does
// (cancelSQL), and those with holds leave their lines (their tickets, lease ID store.JobLeaseID).
// It returns how many it ended.
const supersedeSQL = `WITH old AS (
	SELECT j.id FROM {jobs} j
	WHERE j.resource = $1 AND j.kind = $2 AND j.state IN ('scheduled', 'available', 'retryable') AND j.id <> $3
	ORDER BY j.id FOR UPDATE
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
// the resource's next job if the head was superseded, and returns n as it is now.
func (s *Store) supersede(ctx context.Context, q querier, n *store.Job) (*store.Job, error) {
	if _, err := q.Exec(ctx, s.jq.askRunningToStop, n.Resource, n.Kind, n.ID); err != nil {
		return nil, err
	}
	var ended int
	if err := q.QueryRow(ctx, s.jq.supersede, n.Resource, n.Kind, n.ID).Scan(&ended); err != nil {
		return nil, err
	}
	if ended == 0 {
		return n, nil
	}
	if _, err := q.Exec(ctx, s.jq.promoteFinished, n.ID); err != nil {
		return nil, err
	}
	return scanJob(q.QueryRow(ctx, s.jq.get, n.ID))
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
