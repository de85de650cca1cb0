package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/store"
)

var _ store.JobStore = (*Store)(nil)

// SubmitJob enqueues a job in one write transaction (see store.JobStore). If the job becomes
// its resource's head, this process's workers of its kind are woken once it commits.
func (s *Store) SubmitJob(ctx context.Context, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.SubmitResult
	err := s.inTx(ctx, "submit job", func(x *jobTx) (err error) {
		out, err = x.submit(p)
		return err
	})
	return out, err
}

// SubmitJobTx runs SubmitJob inside the caller's transaction tx, opened on the caller's own
// *sql.DB on this store's file, so that the job is enqueued if and only if the caller's other
// writes commit. It has the same rules and errors; a *store.ResourceBusyError or any other error
// leaves nothing of the job in tx (the caller decides whether to commit the rest).
//
// The store cannot know when tx commits, so it wakes no worker: workers, in this process too,
// find the job at their next poll. Open tx with BEGIN IMMEDIATE (DSN's _txlock=immediate, as
// DSN does) or make its first statement a write: a deferred transaction that reads first and
// then writes after another process's write fails with SQLITE_BUSY instead of waiting.
func (s *Store) SubmitJobTx(ctx context.Context, tx *sql.Tx, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, &store.InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	out, err := newJobTx(ctx, tx, s.now()).submit(p)
	if err != nil {
		return nil, s.wrapJob("submit job", err)
	}
	return out, nil
}

var _ store.TxSubmitter = (*Store)(nil)

// SubmitJobTxAny is SubmitJobTx behind store.TxSubmitter, for callers that do not know the
// store's driver (package baton's Queue.SubmitTx): tx must be a *sql.Tx.
func (s *Store) SubmitJobTxAny(ctx context.Context, tx any, p *store.SubmitParams) (*store.SubmitResult, error) {
	t, ok := tx.(*sql.Tx)
	if !ok {
		return nil, &store.InvalidArgumentError{Field: "tx",
			Rule: fmt.Sprintf("must be a *sql.Tx for the sqlite store (got %T)", tx)}
	}
	return s.SubmitJobTx(ctx, t, p)
}

// submit is SubmitJob on x. Every check that can refuse the submit runs before its first write,
// so that a refusal inside a caller's transaction (SubmitJobTx) leaves nothing behind.
func (x *jobTx) submit(p *store.SubmitParams) (*store.SubmitResult, error) {
	if p.IdempotencyKey != "" {
		j, err := scanJob(x.queryRow(`SELECT `+jobColumns+` FROM jobs WHERE idempotency_key = ?`, p.IdempotencyKey))
		if err == nil {
			if j, err = store.FollowReplacements(j, x.job); err != nil {
				return nil, err
			}
			return &store.SubmitResult{Job: j, Existing: true}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
	}
	k, err := x.kind(p.Kind)
	if err != nil {
		return nil, err
	}
	policy, debounce, err := store.SubmitPolicy(k, p)
	if err != nil {
		return nil, err
	}
	maxAttempts := p.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = k.MaxAttempts
	}
	var holds store.Job
	if err := x.resolveHolds(k, p, &holds); err != nil {
		return nil, err
	}
	cool, err := x.cooling(p.Resource)
	if err != nil {
		return nil, err
	}
	head, err := x.submitHead(p.Resource)
	if err != nil {
		return nil, err
	}
	var rateNext time.Time
	rated := false
	if policy == store.PolicySkip && cool == nil && head == nil {
		if rateNext, rated, err = x.rateReached(k, p.Resource); err != nil {
			return nil, err
		}
	}
	var scoped *store.RateWait // a limit's or a prefix's rate reached (rates.go)
	if policy == store.PolicySkip && cool == nil && head == nil && !rated {
		rs, err := grantRates(x.ctx, x.q, append([]string{p.Resource}, holds.Resources...), holds.Limits)
		if err != nil {
			return nil, err
		}
		if scoped, err = ratesReached(x.ctx, x.q, rs, x.now); err != nil {
			return nil, err
		}
	}
	if head != nil && policy == store.PolicyReject && cool == nil {
		return nil, &store.ResourceBusyError{Resource: p.Resource, HeadJob: head.ID, State: head.State}
	}
	r, err := x.ensureResource(p.Resource)
	if err != nil {
		return nil, err
	}
	seq, err := x.next("job_seq")
	if err != nil {
		return nil, err
	}
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	j := &store.Job{Seq: seq, Kind: p.Kind, Resource: p.Resource, Args: args, MaxAttempts: maxAttempts,
		Priority: p.Priority, IdempotencyKey: p.IdempotencyKey, CreatedAt: x.now, ScheduledAt: x.now,
		State: store.JobAvailable, Shared: holds.Shared, Tree: holds.Tree, Resources: holds.Resources, Limits: holds.Limits,
		TraceParent: p.TraceParent}
	switch {
	case p.Delay > 0:
		j.ScheduledAt = x.now.Add(p.Delay)
	case p.ScheduledAt.After(x.now):
		j.ScheduledAt = p.ScheduledAt
	}
	if at := x.now.Add(debounce); at.After(j.ScheduledAt) {
		j.ScheduledAt = at
	}
	switch {
	case cool != nil:
		j.State, j.FinishedAt = store.JobSkipped, x.now
		j.Errors = append(j.Errors, store.CooldownSkipError(p.Resource, time.Unix(0, cool.coolUntil), cool.coolJob, x.now))
	case rated:
		j.State, j.FinishedAt = store.JobSkipped, x.now
		j.Errors = append(j.Errors, store.RateSkipError(p.Kind, p.Resource, *k.Rate, rateNext, x.now))
	case scoped != nil:
		j.State, j.FinishedAt = store.JobSkipped, x.now
		j.Errors = append(j.Errors, store.RateWaitSkipError(scoped, p.Resource, x.now))
	case head != nil && policy == store.PolicySkip:
		j.State, j.FinishedAt = store.JobSkipped, x.now
		x.addError(j, store.CodeResourceBusy, fmt.Sprintf("resource %q busy: job %d is %s", p.Resource, head.ID, head.State))
	case head == nil:
		x.makeHead(j, r)
	case j.Shared:
		joins, err := x.joinsShared(p.Resource)
		if err != nil {
			return nil, err
		}
		if joins {
			x.makeHead(j, r)
		} else if j.ScheduledAt.After(x.now) {
			j.State = store.JobScheduled
		}
	case j.ScheduledAt.After(x.now):
		j.State = store.JobScheduled
	}
	if err := x.insertJob(j); err != nil {
		return nil, err
	}
	superseded := 0
	if policy == store.PolicyReplace && !j.State.Final() {
		if j, superseded, err = x.supersede(j); err != nil {
			return nil, err
		}
	}
	if x.heads != nil && j.Head {
		x.heads[j.Resource] = j
	}
	return &store.SubmitResult{Job: j, Superseded: superseded}, nil
}

// cooling returns the resource's row if it is cooling down (Kind.ResourceCooldown), else nil.
func (x *jobTx) cooling(resource string) (*resourceRow, error) {
	r, err := x.resource(resource)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil || r.coolUntil <= x.now.UnixNano() {
		return nil, err
	}
	return r, nil
}

// submitHead is headOf, through the batch's memory of heads if there is one.
func (x *jobTx) submitHead(resource string) (*store.Job, error) {
	if x.heads == nil {
		return x.headOf(resource)
	}
	if h, ok := x.heads[resource]; ok {
		return h, nil
	}
	h, err := x.headOf(resource)
	if err == nil {
		x.heads[resource] = h
	}
	return h, err
}

// SubmitMany enqueues the jobs of ps in one write transaction, each as SubmitJob would, in the
// order of ps; a refused or bad job rolls them all back. Workers are woken once per kind, after
// the commit.
func (s *Store) SubmitMany(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	if err := store.ValidateSubmitMany(ps); err != nil {
		return nil, err
	}
	out := make([]*store.SubmitResult, len(ps))
	err := s.inTx(ctx, "submit jobs", func(x *jobTx) error {
		x.heads, x.stmts = map[string]*store.Job{}, map[string]*sql.Stmt{}
		defer x.closeStmts()
		for i, p := range ps {
			res, err := x.submit(p)
			if err != nil {
				return store.AtJob(i, err)
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
