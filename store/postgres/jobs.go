package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

var _ store.JobStore = (*Store)(nil)

// querier is what submit needs: the pool, or a caller's transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// RegisterKinds creates or replaces kinds, all in one transaction.
func (s *Store) RegisterKinds(ctx context.Context, kinds []store.Kind) error {
	for i := range kinds {
		if err := kinds[i].Validate(); err != nil {
			return err
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, k := range kinds {
			from := k.FromStates
			if from == nil {
				from = []string{}
			}
			limits := k.Limits
			if limits == nil {
				limits = []string{}
			}
			var rateMax, rateWindow int64
			if k.Rate != nil {
				rateMax, rateWindow = int64(k.Rate.Max), k.Rate.Window.Milliseconds()
			}
			if _, err := tx.Exec(ctx, s.jq.kindUpsert, k.Name, string(k.Policy), k.MaxAttempts, k.Timeout.Milliseconds(),
				k.Cooldown.Milliseconds(), from, k.RunningState, k.SuccessState, k.FailureState,
				k.ResourceCooldown.Milliseconds(), k.Mode, limits, k.Debounce.Milliseconds(), rateMax, rateWindow); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.jobErr("register kinds", err)
	}
	return nil
}

// Kinds lists the registered kinds.
func (s *Store) Kinds(ctx context.Context) ([]store.Kind, error) {
	rows, err := s.pool.Query(ctx, s.jq.kindList)
	if err != nil {
		return nil, s.jobErr("list kinds", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Kind, error) { return scanKind(r) })
	if err != nil {
		return nil, s.jobErr("list kinds", err)
	}
	return out, nil
}

func scanKind(r pgx.Row) (store.Kind, error) {
	var k store.Kind
	var policy string
	var timeoutMS, cooldownMS, resourceCooldownMS, debounceMS, rateWindowMS int64
	var rateMax int
	err := r.Scan(&k.Name, &policy, &k.MaxAttempts, &timeoutMS, &cooldownMS, &k.FromStates, &k.RunningState,
		&k.SuccessState, &k.FailureState, &resourceCooldownMS, &k.Mode, &k.Limits, &debounceMS, &rateMax, &rateWindowMS)
	k.Debounce = time.Duration(debounceMS) * time.Millisecond
	if rateMax > 0 {
		k.Rate = &store.Rate{Max: rateMax, Window: time.Duration(rateWindowMS) * time.Millisecond}
	}
	k.Policy = store.BusyPolicy(policy)
	k.Timeout = time.Duration(timeoutMS) * time.Millisecond
	k.Cooldown = time.Duration(cooldownMS) * time.Millisecond
	k.ResourceCooldown = time.Duration(resourceCooldownMS) * time.Millisecond
	if len(k.FromStates) == 0 {
		k.FromStates = nil
	}
	if len(k.Limits) == 0 {
		k.Limits = nil
	}
	return k, err
}

// SubmitJob enqueues a job in a transaction of its own: a SubmitMany of one job, one
// round trip.
func (s *Store) SubmitJob(ctx context.Context, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out, err := s.submitAny(ctx, []*store.SubmitParams{p})
	var fail *submitFailure
	if errors.As(err, &fail) {
		return nil, fail.err
	}
	if err != nil {
		return nil, s.jobErr("submit job", err)
	}
	return out[0], nil
}

// SubmitJobTx enqueues a job in the caller's transaction: it exists, and wakes workers (NOTIFY
// is delivered at commit), only if that transaction commits.
func (s *Store) SubmitJobTx(ctx context.Context, tx pgx.Tx, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, &store.InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
	}
	res, err := s.submit(ctx, tx, p)
	if err != nil {
		return nil, s.jobErr("submit job", err)
	}
	return res, nil
}

var _ store.TxSubmitter = (*Store)(nil)

// SubmitJobTxAny is SubmitJobTx behind store.TxSubmitter, for callers that cannot name pgx.Tx
// (package baton's Queue.SubmitTx): tx is a pgx.Tx, or a *sql.Tx on pgx's stdlib driver (see
// SubmitJobSQLTx).
func (s *Store) SubmitJobTxAny(ctx context.Context, tx any, p *store.SubmitParams) (*store.SubmitResult, error) {
	switch t := tx.(type) {
	case pgx.Tx:
		return s.SubmitJobTx(ctx, t, p)
	case *sql.Tx:
		return s.SubmitJobSQLTx(ctx, t, p)
	}
	return nil, &store.InvalidArgumentError{Field: "tx",
		Rule: fmt.Sprintf("must be a pgx.Tx or a *sql.Tx (pgx stdlib driver) for the postgres store (got %T)", tx)}
}

// submit: return the job an idempotency key names; else lock the resource row (so that its
// head is decided by one transaction at a time), see whether it is busy, apply the policy, insert.
func (s *Store) submit(ctx context.Context, q querier, p *store.SubmitParams) (*store.SubmitResult, error) {
	if p.IdempotencyKey != "" {
		if j, err := scanJob(q.QueryRow(ctx, s.jq.existing, p.IdempotencyKey)); err == nil {
			return s.existing(ctx, q, j)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	kind, err := scanKind(q.QueryRow(ctx, s.jq.kindGet, p.Kind))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, unknownKind(p.Kind)
	} else if err != nil {
		return nil, err
	}
	shared, limits, err := store.ResolveHolds(&kind, p)
	if err != nil {
		return nil, err
	}
	if len(limits) > 0 {
		var missing string
		err := q.QueryRow(ctx, s.jq.unknownLimit, limits).Scan(&missing)
		switch {
		case err == nil:
			return nil, store.UnknownLimit(missing)
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, err
		}
	}
	tree, err := s.checkTreeResources(ctx, q, p)
	if err != nil {
		return nil, err
	}
	keys := append([]string{p.Resource}, p.Resources...)
	scoped, err := s.scopedRates(ctx, q, keys, limits)
	if err != nil {
		return nil, err
	}
	// A key under a rated prefix: the job's attempts are granted through holds, which count it.
	ratedKey := false
	for _, r := range scoped {
		ratedKey = ratedKey || r.Wait.Prefix != ""
	}
	var resources []string // NULL for none
	if len(p.Resources) > 0 {
		resources = p.Resources
	}
	policy, debounce, err := store.SubmitPolicy(&kind, p)
	if err != nil {
		return nil, err
	}
	if policy == store.PolicyReplace {
		// The running jobs a replace asks to stop, locked before the resource (jobs_replace.go).
		if _, err := q.Exec(ctx, s.jq.lockReplaced, p.Resource, p.Kind); err != nil {
			return nil, err
		}
	}
	var cooldownEnd, coolUntil *time.Time
	var coolJob int64
	var now time.Time
	if err := q.QueryRow(ctx, s.jq.lockResource, p.Resource, p.Kind).Scan(&cooldownEnd, &coolUntil, &coolJob, &now); err != nil {
		return nil, err
	}
	if rt, ok := q.(retryTx); ok && policy == store.PolicyReplace && !rt.last {
		var n int
		if err := q.QueryRow(ctx, s.jq.lockReplacedNowait, p.Resource, p.Kind).Scan(&n); err != nil {
			return nil, raced(err)
		}
	}
	var headID int64
	var headState string
	err = q.QueryRow(ctx, s.jq.busy, p.Resource).Scan(&headID, &headState)
	busy := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if busy && policy == store.PolicyReject && coolUntil == nil {
		return nil, &store.ResourceBusyError{Resource: p.Resource, HeadJob: headID, State: store.JobState(headState)}
	}
	var rateNext time.Time
	rated := false
	if policy == store.PolicySkip && !busy && coolUntil == nil && kind.Rate != nil {
		if rateNext, rated, err = s.rateReached(ctx, q, &kind, p.Resource); err != nil {
			return nil, err
		}
	}
	var scopedWait *store.RateWait // a limit's or a prefix's rate reached (rates_scoped.go)
	if policy == store.PolicySkip && !busy && coolUntil == nil && !rated && len(scoped) > 0 {
		if scopedWait, err = s.scopedReached(ctx, q, scoped); err != nil {
			return nil, err
		}
	}
	skipped := coolUntil != nil || busy && policy == store.PolicySkip || rated || scopedWait != nil
	maxAttempts := p.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = kind.MaxAttempts
	}
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	errs := []byte(`[]`)
	switch {
	case coolUntil != nil:
		errs, _ = json.Marshal([]store.JobError{store.CooldownSkipError(p.Resource, *coolUntil, coolJob, now)})
	case rated:
		errs, _ = json.Marshal([]store.JobError{store.RateSkipError(p.Kind, p.Resource, *kind.Rate, rateNext, now)})
	case scopedWait != nil:
		errs, _ = json.Marshal([]store.JobError{store.RateWaitSkipError(scopedWait, p.Resource, now)})
	case skipped:
		errs, _ = json.Marshal([]map[string]any{{"attempt": 0, "at": time.Now().UTC(), "code": store.CodeResourceBusy,
			"message": fmt.Sprintf("resource busy: job %d is %s", headID, headState)}})
	}
	var at *time.Time
	if !p.ScheduledAt.IsZero() {
		at = &p.ScheduledAt
	}
	delayMS := p.Delay.Milliseconds()
	if debounce > 0 {
		// No earlier than the debounce after the store's now (which lockResource read).
		deb := now.Add(debounce)
		if at == nil {
			delayMS = max(delayMS, debounce.Milliseconds())
		} else if at.Before(deb) {
			at = &deb
		}
	}
	head := !busy && coolUntil == nil && !rated && scopedWait == nil
	if busy && shared && !skipped {
		// A shared job joins the heads if they are all shared and no job waits behind them.
		if err := q.QueryRow(ctx, s.jq.joinsShared, p.Resource).Scan(&head); err != nil {
			return nil, err
		}
	}
	j, err := scanJob(q.QueryRow(ctx, s.jq.insert, p.Kind, p.Resource, string(args), skipped, head, maxAttempts,
		p.Priority, p.IdempotencyKey, at, delayMS, cooldownEnd, string(errs), shared, resources, limits, tree, ratedKey, p.TraceParent))
	if errors.Is(err, pgx.ErrNoRows) {
		// A concurrent submit with the same key committed first (the insert waited for it).
		j, err = scanJob(q.QueryRow(ctx, s.jq.existing, p.IdempotencyKey))
		if err != nil {
			return nil, err
		}
		return s.existing(ctx, q, j)
	}
	if err != nil {
		return nil, err
	}
	superseded := 0
	if policy == store.PolicyReplace && !skipped {
		if j, superseded, err = s.supersede(ctx, q, j); err != nil {
			return nil, err
		}
		head = j.Head
	}
	if head {
		if _, err := q.Exec(ctx, s.jq.notifyAny, p.Kind); err != nil {
			return nil, err
		}
		s.hub.Notify(notify.JobKey(p.Kind))
	}
	return &store.SubmitResult{Job: j, Superseded: superseded}, nil
}

func unknownKind(name string) error {
	return &store.InvalidArgumentError{Field: "kind", Rule: fmt.Sprintf("must name a registered kind (%q is not; register it first)", name)}
}

// GetJob returns one job.
func (s *Store) GetJob(ctx context.Context, id int64) (*store.Job, error) {
	if id <= 0 {
		return nil, &store.InvalidArgumentError{Field: "id", Rule: fmt.Sprintf("must be a positive job ID (got %d)", id)}
	}
	j, err := scanJob(s.pool.QueryRow(ctx, s.jq.get, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.jobErr("get job", err)
	}
	return j, nil
}

// ListJobs lists jobs by ID, with a statement for its filters and state (listJobsSQL).
func (s *Store) ListJobs(ctx context.Context, p *store.JobListParams) ([]*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	key, args := listKey{state: p.State}, []any{p.After}
	for _, f := range []struct {
		bit int
		val string
	}{{listByKind, p.Kind}, {listByResource, p.Resource}} {
		if f.val != "" {
			key.filters, args = key.filters|f.bit, append(args, f.val)
		}
	}
	sql, ok := s.jq.list[key]
	if !ok { // Validate admits only the states of jobStates
		return nil, &store.InvalidArgumentError{Field: "state", Rule: fmt.Sprintf("is not a job state (got %q)", p.State)}
	}
	rows, err := s.pool.Query(ctx, sql, append(args, p.Limit)...)
	if err != nil {
		return nil, s.jobErr("list jobs", err)
	}
	out, err := collectJobs(rows)
	if err != nil {
		return nil, s.jobErr("list jobs", err)
	}
	return out, nil
}

// SubscribeJobs wakes the subscriber when a job of any of kinds may have become claimable, in
// this process or (through NOTIFY, sent while some worker of the kind recently found nothing to
// do) in any other.
func (s *Store) SubscribeJobs(kinds ...string) (<-chan struct{}, func()) {
	return s.subscribe(notify.JobKeys(kinds)...)
}

func collectJobs(rows pgx.Rows) ([]*store.Job, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Job, error) { return scanJob(r) })
}

func scanJob(r pgx.Row) (*store.Job, error) { return scanJobAfter(r) }

// scanJobAfter scans the job columns that follow the columns lead scans into.
func scanJobAfter(r pgx.Row, lead ...any) (*store.Job, error) {
	var j store.Job
	var state string
	var errs []byte
	var attemptedAt, finishedAt, leaseExp *time.Time
	var token, timeoutMS int64
	var args []byte
	var traceParent *string
	err := r.Scan(append(lead, &j.ID, &j.Seq, &j.Kind, &j.Resource, &args, &state, &j.Attempt, &j.MaxAttempts, &j.Priority,
		&j.IdempotencyKey, &errs, &j.CreatedAt, &j.ScheduledAt, &attemptedAt, &finishedAt,
		&j.Head, &j.Worker, &token, &leaseExp, &j.CancelRequested, &timeoutMS, &j.Owner,
		&j.Shared, &j.Resources, &j.Limits, &j.Tree, &j.SupersededBy, &j.Holds, &traceParent)...)
	if err != nil {
		return nil, err
	}
	if traceParent != nil {
		j.TraceParent = *traceParent
	}
	j.Args = json.RawMessage(args)
	if len(j.Resources) == 0 {
		j.Resources = nil
	}
	if len(j.Limits) == 0 {
		j.Limits = nil
	}
	j.State = store.JobState(state)
	j.Token = uint64(token)
	j.Timeout = time.Duration(timeoutMS) * time.Millisecond
	if attemptedAt != nil {
		j.AttemptedAt = *attemptedAt
	}
	if finishedAt != nil {
		j.FinishedAt = *finishedAt
	}
	if leaseExp != nil {
		j.LeaseExpiresAt = *leaseExp
	}
	if err := json.Unmarshal(errs, &j.Errors); err != nil {
		return nil, fmt.Errorf("job %d: errors column: %w", j.ID, err)
	}
	return &j, nil
}

// jobErr maps errors of job operations: the store's own errors pass through (wrapped only if
// they are not already store errors), ErrClosed once closed.
func (s *Store) jobErr(op string, err error) error {
	var inv *store.InvalidArgumentError
	var busy *store.ResourceBusyError
	var st *store.JobStateError
	var vm *store.VersionMismatchError
	if errors.As(err, &inv) || errors.As(err, &busy) || errors.As(err, &st) || errors.As(err, &vm) ||
		errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotHeld) {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, store.ErrClosed)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}
