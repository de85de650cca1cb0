package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// The job queue on SQLite (store.JobStore; the semantics are in docs/jobs.md). Every write is
// one BEGIN IMMEDIATE transaction: SQLite's write lock serialises it with every other writer of
// the file, in this process and in others, and the store's clock is read once that lock is held.
// Workers of this process are woken through the same in-process hub as lease waiters; workers of
// other processes sharing the file find new jobs at their next poll.

// SubscribeJobs registers interest in jobs of kinds becoming claimable in this process (a
// submit, a promotion, a retry). After Close, every subscriber is woken once and then polls into
// store.ErrClosed, as lease waiters do.
func (s *Store) SubscribeJobs(kinds ...string) (<-chan struct{}, func()) {
	return s.hub.Subscribe(notify.JobKeys(kinds)...)
}

func validateID(id int64) error {
	if id <= 0 {
		return &store.InvalidArgumentError{Field: "id", Rule: fmt.Sprintf("must be a positive job ID (got %d)", id)}
	}
	return nil
}

// GetJob returns one job, or store.ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id int64) (*store.Job, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	j, err := newJobTx(ctx, s.db, s.now()).job(id)
	if err != nil {
		return nil, s.wrapJob("get job", err)
	}
	return j, nil
}

// ListJobs lists jobs by ID, after p.After, at most p.Limit. The WHERE clause is assembled from
// constant fragments, one per filter set, so that SQLite can use the (state, id) and
// (resource, id) indexes; every value is a bind parameter.
func (s *Store) ListJobs(ctx context.Context, p *store.JobListParams) ([]*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	where, args := []string{"id > ?"}, []any{p.After}
	for _, f := range []struct {
		cond, val string
	}{{"state = ?", string(p.State)}, {"kind = ?", p.Kind}, {"resource = ?", p.Resource}} {
		if f.val != "" {
			where, args = append(where, f.cond), append(args, f.val)
		}
	}
	jobs, err := scanJobs(s.db.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id LIMIT ?`, append(args, p.Limit)...))
	if err != nil {
		return nil, s.wrap("list jobs", err)
	}
	return jobs, nil
}

// ClaimJobs starts up to p.Limit claimable heads of p.Kinds, by priority then seq. A job whose
// kind's guard refuses its resource's state is discarded instead (and the next job of its
// resource promoted, which may then be claimed by the same call).
//
// One resource, one line: a head whose resource a lease holds, or that rests after a lease (its
// cooldown or lock-delay), is not claimed; the lease row is read in the claim's write
// transaction, and an acquire reads the running jobs in its own (see the acquire statement).
//
// INDEXED BY: without statistics SQLite would rather read jobs_by_state, i.e. every queued job,
// heads or not; the partial index reads heads only (and the statement fails if it cannot).
func (s *Store) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	kinds, err := json.Marshal(p.Kinds)
	if err != nil {
		return nil, err
	}
	s.claims.Saw(p.Kinds, time.Now())
	var out []*store.Job
	err = s.inTx(ctx, "claim jobs", func(x *jobTx) error {
		var err error
		if out, err = s.claimBeyond(x, p, string(kinds), nil); err != nil {
			return err
		}
		for len(out) < p.Limit {
			cands, err := scanJobs(x.q.QueryContext(x.ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_claimable
				WHERE head AND state IN `+sqlClaimable+` AND scheduled_at <= ?1 AND beyond IS NULL
					AND kind IN (SELECT value FROM json_each(?2))
					AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = jobs.resource AND l.available_at > ?1)
					AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.key = jobs.resource AND t.expires_at > ?1
						AND (t.first OR t.created_at < jobs.created_at))
				ORDER BY priority, seq LIMIT ?3`, x.now.UnixNano(), string(kinds), p.Limit-len(out)))
			if err != nil || len(cands) == 0 {
				return err
			}
			refused := false
			for _, j := range cands {
				started, err := x.start(j, p.Worker, p.Owner, p.TTL)
				if err != nil {
					return err
				}
				if started {
					out = append(out, j)
				} else {
					refused = true
				}
			}
			if !refused {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// start runs j for worker on behalf of owner if its kind's guard allows its resource's state,
// else discards it; a job whose kind's rate is reached on its resource waits (rateWait). The fencing token is drawn here, inside the write transaction, after the
// job was read.
func (x *jobTx) start(j *store.Job, worker, owner string, ttl time.Duration) (bool, error) {
	k, err := x.kind(j.Kind)
	if err != nil {
		return false, err
	}
	r, err := x.resource(j.Resource)
	if err != nil {
		return false, err
	}
	if !guardAllows(k, r.state, j.Attempt) {
		return false, x.discardUnguarded(j, k, r)
	}
	if next, reached, err := x.rateReached(k, j.Resource); err != nil || reached {
		if err != nil {
			return false, err
		}
		return false, x.rateWait(j, next)
	}
	rates, err := grantRates(x.ctx, x.q, []string{j.Resource}, nil)
	if err != nil {
		return false, err
	}
	if w, err := ratesReached(x.ctx, x.q, rates, x.now); err != nil || w != nil {
		if err != nil {
			return false, err
		}
		return false, x.rateWait(j, w.Next)
	}
	tok, err := x.next("token")
	if err != nil {
		return false, err
	}
	if err := x.begin(j, k, r, worker, owner, tok, x.now.Add(ttl)); err != nil {
		return false, err
	}
	return true, recordRates(x.ctx, x.q, rates, x.now)
}

// discardUnguarded ends j, discarded: its kind's guard refuses its resource's state.
func (x *jobTx) discardUnguarded(j *store.Job, k *store.Kind, r *resourceRow) error {
	x.addError(j, store.CodeInvalidResourceState, fmt.Sprintf("resource %q is in state %q; kind %q starts only from %q",
		j.Resource, r.state, k.Name, k.FromStates))
	return x.end(j, store.JobDiscarded, false)
}

// begin starts j's attempt for worker on behalf of owner, with token tok, its lease expiring at
// expires.
func (x *jobTx) begin(j *store.Job, k *store.Kind, r *resourceRow, worker, owner string, tok int64, expires time.Time) error {
	j.State, j.Attempt, j.AttemptedAt = store.JobRunning, j.Attempt+1, x.now
	j.Worker, j.Owner, j.Token, j.LeaseExpiresAt = worker, owner, uint64(tok), expires
	j.CancelRequested, j.Timeout = false, k.Timeout
	if err := x.saveJob(j); err != nil {
		return err
	}
	if err := x.rateGrant(k, j.Resource); err != nil {
		return err
	}
	if k.RunningState != "" && k.RunningState != r.state {
		return x.setResourceState(r, k.RunningState)
	}
	return nil
}

// guardAllows: FromStates (any if empty), plus RunningState for a job that had an attempt.
func guardAllows(k *store.Kind, state string, attempt int) bool {
	return len(k.FromStates) == 0 || slices.Contains(k.FromStates, state) ||
		attempt > 0 && k.RunningState != "" && state == k.RunningState
}

// HeartbeatJob extends the running attempt's live lease by p.TTL from now, in one statement, if
// the attempt is p.Owner's.
func (s *Store) HeartbeatJob(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	now := s.now().UnixNano()
	var cancel, holds bool
	var resource string
	err := s.db.QueryRowContext(ctx, `UPDATE jobs SET lease_expires_at = ?1 + ?2
		WHERE id = ?3 AND token = ?4 AND owner = ?5 AND state = 'running' AND lease_expires_at > ?1
		RETURNING cancel_requested, beyond IS NOT NULL, resource`, now, int64(p.TTL), p.ID, int64(p.Token), p.Owner).
		Scan(&cancel, &holds, &resource)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotHeld
	}
	if err != nil {
		return nil, s.wrap("heartbeat job", err)
	}
	if holds {
		// Its holds, from a later reading of the clock: they outlive the row a little, and end
		// with the attempt (endHolds).
		if err := s.heartbeatHolds(ctx, p.ID, resource, p.Owner, p.TTL); err != nil {
			return nil, err
		}
	}
	return &store.HeartbeatResult{CancelRequested: cancel, TTLLeft: p.TTL}, nil
}

// CompleteJob ends the running attempt (even past its lease, until it is reaped) as succeeded: a
// cancel request that came too late is ignored, since the work is done.
func (s *Store) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.Job
	err := s.inTx(ctx, "complete job", func(x *jobTx) (err error) {
		if out, err = x.runningJob(p.ID, p.Token, p.Owner); err != nil {
			return err
		}
		out.LeaseExpiresAt = time.Time{}
		return x.end(out, store.JobSucceeded, true)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FailJob ends the running attempt with an error: retryable after p.RetryAfter while attempts
// remain, else (or if p.Permanent) discarded; cancelled if a cancel was requested.
func (s *Store) FailJob(ctx context.Context, p *store.FailParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.Job
	err := s.inTx(ctx, "fail job", func(x *jobTx) (err error) {
		if out, err = x.runningJob(p.ID, p.Token, p.Owner); err != nil {
			return err
		}
		return x.endAttempt(out, p.Code, p.Message, p.Permanent, p.RetryAfter)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompleteMany completes many attempts in one write transaction (one commit, one fsync). The
// result is aligned with ps: nil where the attempt was no longer running with that token, or is
// another owner's.
func (s *Store) CompleteMany(ctx context.Context, ps []*store.CompleteParams) ([]*store.Job, error) {
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	out := make([]*store.Job, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	err := s.inTx(ctx, "complete jobs", func(x *jobTx) error {
		for i, p := range ps {
			j, err := x.runningJob(p.ID, p.Token, p.Owner)
			if errors.Is(err, store.ErrNotHeld) {
				continue
			}
			if err != nil {
				return err
			}
			j.LeaseExpiresAt = time.Time{}
			if err := x.end(j, store.JobSucceeded, true); err != nil {
				return err
			}
			out[i] = j
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
