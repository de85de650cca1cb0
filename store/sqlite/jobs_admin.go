package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonhq/baton/store"
)

// CancelJob cancels a job that is not running at once, or requests the cancellation of a running
// one (it keeps its resource until its worker stops or its lease is reaped).
func (s *Store) CancelJob(ctx context.Context, id int64) (*store.Job, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	var out *store.Job
	err := s.inTx(ctx, "cancel job", func(x *jobTx) (err error) {
		if out, err = x.job(id); err != nil {
			return err
		}
		switch {
		case out.State.Final():
			return &store.JobStateError{ID: id, Op: "cancel", State: out.State}
		case out.State == store.JobRunning:
			out.CancelRequested = true
			return x.saveJob(out)
		}
		return x.end(out, store.JobCancelled, true)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RetryJob makes a discarded, cancelled or skipped job available again at the back of its
// resource's queue, or a retryable job claimable now.
func (s *Store) RetryJob(ctx context.Context, id int64) (*store.Job, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	var out *store.Job
	err := s.inTx(ctx, "retry job", func(x *jobTx) (err error) {
		if out, err = x.job(id); err != nil {
			return err
		}
		j := out
		switch j.State {
		case store.JobRetryable:
			j.ScheduledAt = x.now
			x.wake[j.Kind] = true
			return x.saveJob(j)
		case store.JobDiscarded, store.JobCancelled, store.JobSkipped:
		default:
			return &store.JobStateError{ID: id, Op: "retry", State: j.State}
		}
		if j.Seq, err = x.next("job_seq"); err != nil {
			return err
		}
		if j.Attempt >= j.MaxAttempts {
			j.MaxAttempts = j.Attempt + 1
		}
		j.State, j.ScheduledAt, j.FinishedAt, j.CancelRequested = store.JobAvailable, x.now, time.Time{}, false
		head, err := x.headOf(j.Resource)
		if err != nil {
			return err
		}
		if head == nil {
			r, err := x.resource(j.Resource)
			if err != nil {
				return err
			}
			x.makeHead(j, r)
		}
		return x.saveJob(j)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PurgeJobs deletes the discarded jobs that match p.
func (s *Store) PurgeJobs(ctx context.Context, p *store.PurgeParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	ids, err := json.Marshal(p.IDs)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.inTx(ctx, "purge jobs", func(x *jobTx) error {
		res, err := x.q.ExecContext(x.ctx, `DELETE FROM jobs WHERE state = 'discarded'
			AND (?1 = 0 OR id IN (SELECT value FROM json_each(?2)))
			AND (?3 = '' OR kind = ?3) AND (?4 = '' OR resource = ?4)`, len(p.IDs), string(ids), p.Kind, p.Resource)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// ReapJobs ends the attempts of running jobs whose lease expired on the store's clock
// (CodeWorkerTimeout) or that hold none (CodeLockStateLost), oldest lease first.
func (s *Store) ReapJobs(ctx context.Context, p *store.ReapParams) ([]*store.ReapedJob, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out []*store.ReapedJob
	err := s.inTx(ctx, "reap jobs", func(x *jobTx) error {
		out, x.reaping = nil, true
		jobs, err := scanJobs(x.q.QueryContext(x.ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_running_by_lease
			WHERE state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
			ORDER BY lease_expires_at LIMIT ?`, x.now.UnixNano(), p.Limit))
		if err != nil {
			return err
		}
		for _, j := range jobs {
			reason, msg := store.CodeLockStateLost, "the running attempt held no lease"
			if !j.LeaseExpiresAt.IsZero() {
				reason = store.CodeWorkerTimeout
				msg = fmt.Sprintf("the lease of worker %q (token %d) expired %s ago", j.Worker, j.Token, x.now.Sub(j.LeaseExpiresAt))
			}
			if err := x.endAttempt(j, reason, msg, false, p.RetryAfter); err != nil {
				return err
			}
			out = append(out, &store.ReapedJob{Job: j, Reason: reason})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CleanJobs deletes succeeded, cancelled, skipped and superseded jobs that finished more than p.Age ago (and
// discarded ones if p.Discarded, more than p.DeadLetterAge() ago), oldest first, at most p.Limit.
func (s *Store) CleanJobs(ctx context.Context, p *store.CleanParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var n int64
	err := s.inTx(ctx, "clean jobs", func(x *jobTx) error {
		dl := p.DeadLetterAge()
		res, err := x.q.ExecContext(x.ctx, `DELETE FROM jobs WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_finished
			WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped', 'superseded') AND finished_at < ?1
				AND CASE WHEN state = 'discarded' THEN ?2 AND finished_at < ?4 ELSE finished_at < ?5 END
			ORDER BY finished_at LIMIT ?3)`, x.now.Add(-min(p.Age, dl)).UnixNano(), p.Discarded, p.Limit,
			x.now.Add(-dl).UnixNano(), x.now.Add(-p.Age).UnixNano())
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		// The line's expired tickets (abandoned waits), which everyone skips: a waiter that
		// comes back starts again at the back either way.
		_, err = x.q.ExecContext(x.ctx, `DELETE FROM tickets WHERE (key, lease_id) IN (SELECT key, lease_id FROM tickets
			WHERE expires_at < ?1 LIMIT ?2)`, x.now.UnixNano(), p.Limit)
		if err != nil {
			return err
		}
		// Holds (shared, several keys, limits) that ended or expired longer ago than the age:
		// their lock-delays are over (at most store.MaxRest), and a release that comes this late
		// learns ErrNotHeld instead of AlreadyReleased, as for a job long deleted.
		_, err = x.q.ExecContext(x.ctx, `DELETE FROM holds WHERE (lease_id, key) IN (SELECT lease_id, key FROM holds
			WHERE expires_at < ?1 LIMIT ?2)`, x.now.Add(-max(p.Age, store.MaxRest)).UnixNano(), p.Limit)
		return err
	})
	return int(n), err
}

// jobCountsSQL reads only the index jobs_unfinished_by_kind (migration 0006).
const jobCountsSQL = `SELECT kind, state, count(*) FROM jobs
	WHERE state IN ` + sqlUnfinished + ` GROUP BY kind, state ORDER BY kind, state`

// JobCounts counts unfinished jobs per kind and state, ordered by kind then state.
func (s *Store) JobCounts(ctx context.Context) ([]*store.JobCount, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, jobCountsSQL)
	if err != nil {
		return nil, s.wrap("job counts", err)
	}
	defer rows.Close()
	var out []*store.JobCount
	for rows.Next() {
		var c store.JobCount
		if err := rows.Scan(&c.Kind, &c.State, &c.Count); err != nil {
			return nil, s.wrap("job counts", err)
		}
		out = append(out, &c)
	}
	return out, s.wrap("job counts", rows.Err())
}
