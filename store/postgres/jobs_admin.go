package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// CancelJob cancels a job that is not running, or requests the cancellation of a running one.
func (s *Store) CancelJob(ctx context.Context, id int64) (*store.Job, error) {
	if id <= 0 {
		return nil, &store.InvalidArgumentError{Field: "id", Rule: fmt.Sprintf("must be a positive job ID (got %d)", id)}
	}
	var out *store.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		j, err := s.lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		switch {
		case j.State.Final():
			return &store.JobStateError{ID: id, Op: "cancel", State: j.State}
		case j.State == store.JobRunning:
			out, err = scanJob(tx.QueryRow(ctx, s.jq.setCancel, id))
			return err
		}
		// Job, then resource, then the fresh snapshot that promotes: the order of every path.
		if _, err := tx.Exec(ctx, s.jq.lockFinished, id); err != nil {
			return err
		}
		if out, err = scanJob(tx.QueryRow(ctx, s.jq.cancel, id)); err != nil {
			return err
		}
		if out.Beyond() {
			// A waiting job with holds leaves its lines.
			if _, err := tx.Exec(ctx, s.jq.dropJobTickets, store.JobLeaseID(id)); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, s.jq.promoteFinished, id)
		return err
	})
	if err != nil {
		return nil, s.jobErr("cancel job", err)
	}
	return out, nil
}

func (s *Store) lockJob(ctx context.Context, tx pgx.Tx, id int64) (*store.Job, error) {
	j, err := scanJob(tx.QueryRow(ctx, s.jq.lockJob, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: job %d: %w", id, store.ErrNotFound)
	}
	return j, err
}

// RetryJob puts a finished job back at the end of its resource's queue, or makes a retryable
// job claimable now.
func (s *Store) RetryJob(ctx context.Context, id int64) (*store.Job, error) {
	if id <= 0 {
		return nil, &store.InvalidArgumentError{Field: "id", Rule: fmt.Sprintf("must be a positive job ID (got %d)", id)}
	}
	var out *store.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		j, err := s.lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		switch j.State {
		case store.JobRetryable:
			out, err = scanJob(tx.QueryRow(ctx, s.jq.retryNow, id))
		case store.JobDiscarded, store.JobCancelled, store.JobSkipped:
			if _, err := tx.Exec(ctx, s.jq.lockFinished, id); err != nil {
				return err
			}
			out, err = scanJob(tx.QueryRow(ctx, s.jq.retryFinal, id))
		default:
			return &store.JobStateError{ID: id, Op: "retry", State: j.State}
		}
		if err == nil && out.Head {
			_, err = tx.Exec(ctx, s.jq.notifyAny, out.Kind)
		}
		return err
	})
	if err != nil {
		return nil, s.jobErr("retry job", err)
	}
	if out.Head {
		s.hub.Notify(notify.JobKey(out.Kind))
	}
	return out, nil
}

// PurgeJobs deletes dead letters.
func (s *Store) PurgeJobs(ctx context.Context, p *store.PurgeParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	ids := p.IDs
	if ids == nil {
		ids = []int64{}
	}
	tag, err := s.pool.Exec(ctx, s.jq.purge, ids, p.Kind, p.Resource)
	if err != nil {
		return 0, s.jobErr("purge jobs", err)
	}
	return int(tag.RowsAffected()), nil
}

// ReapJobs ends attempts whose lease expired or is missing. Each job is ended by the same
// statement as a worker's failure, which re-checks that the lease is still expired, so a job
// that completed meanwhile is left alone.
func (s *Store) ReapJobs(ctx context.Context, p *store.ReapParams) ([]*store.ReapedJob, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.jq.reapCandidates, p.Limit)
	if err != nil {
		return nil, s.jobErr("reap jobs", err)
	}
	type cand struct {
		id      int64
		token   int64
		noLease bool
	}
	cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cand, error) {
		var c cand
		return c, r.Scan(&c.id, &c.token, &c.noLease)
	})
	if err != nil {
		return nil, s.jobErr("reap jobs", err)
	}
	var out []*store.ReapedJob
	for _, c := range cands {
		reason, msg := store.CodeWorkerTimeout, "the attempt's lease expired: its worker stopped heartbeating"
		if c.noLease {
			reason, msg = store.CodeLockStateLost, "the job was running without a lease"
		}
		j, err := s.finish(ctx, "reap job", c.id, uint64(c.token), "", false, reason, msg, false, p.RetryAfter, true)
		if errors.Is(err, store.ErrNotHeld) {
			continue // completed, failed or reaped by someone else meanwhile
		}
		if err != nil {
			return out, err
		}
		out = append(out, &store.ReapedJob{Job: j, Reason: reason})
	}
	return out, nil
}

// CleanJobs deletes finished jobs older than p.Age (dead letters, if p.Discarded, older than
// p.DeadLetterAge()).
func (s *Store) CleanJobs(ctx context.Context, p *store.CleanParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, s.jq.clean, p.Age.Milliseconds(), p.Discarded, p.Limit, p.DeadLetterAge().Milliseconds())
	if err != nil {
		return 0, s.jobErr("clean jobs", err)
	}
	return int(tag.RowsAffected()), nil
}

// JobCounts counts unfinished jobs per kind and state.
func (s *Store) JobCounts(ctx context.Context) ([]*store.JobCount, error) {
	rows, err := s.pool.Query(ctx, s.jq.counts)
	if err != nil {
		return nil, s.jobErr("count jobs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.JobCount, error) {
		var c store.JobCount
		var st string
		err := r.Scan(&c.Kind, &st, &c.Count)
		c.State = store.JobState(st)
		return &c, err
	})
	if err != nil {
		return nil, s.jobErr("count jobs", err)
	}
	return out, nil
}
