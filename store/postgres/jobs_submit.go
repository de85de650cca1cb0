package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// submitTries bounds the retries of a submit that lost a race it can only see at insert time: a
// concurrent submit committed the same idempotency key (its row was not in the statement's
// snapshot), or a deadlock with it. The next try sees the winner's job.
const submitTries = 10

// SubmitMany enqueues the jobs of ps in one round trip and one transaction (see store.JobStore and
// submitInsertSQL). Workers of this process are woken once per kind; others through NOTIFY.
func (s *Store) SubmitMany(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	if err := store.ValidateSubmitMany(ps); err != nil {
		return nil, err
	}
	out, err := s.submitAny(ctx, ps)
	var fail *submitFailure
	if errors.As(err, &fail) {
		return nil, store.AtJob(fail.index, fail.err)
	}
	if err != nil {
		return nil, s.jobErr("submit jobs", err)
	}
	return out, nil
}

// submitFailure is the job of ps the statement refused, with the error a single submit of it
// would have returned.
type submitFailure struct {
	index int
	err   error
}

func (e *submitFailure) Error() string { return fmt.Sprintf("job %d: %v", e.index, e.err) }

// submitMany runs the submit pipeline, retrying the races it can lose (see submitTries).
func (s *Store) submitMany(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	n := len(ps)
	kinds, resources, args, keys, policies := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n)
	maxAttempts, priorities := make([]int32, n), make([]int32, n)
	ats, delays, tps := make([]pgtype.Timestamptz, n), make([]int64, n), make([]string, n)
	for i, p := range ps {
		tps[i] = p.TraceParent
		kinds[i], resources[i], keys[i], policies[i] = p.Kind, p.Resource, p.IdempotencyKey, string(p.Policy)
		args[i] = "{}"
		if len(p.Args) > 0 {
			args[i] = string(p.Args)
		}
		maxAttempts[i], priorities[i] = int32(p.MaxAttempts), int32(p.Priority)
		if !p.ScheduledAt.IsZero() {
			ats[i] = pgtype.Timestamptz{Time: p.ScheduledAt, Valid: true}
		}
		delays[i] = p.Delay.Milliseconds()
	}
	for try := 1; ; try++ {
		out, woken, err := s.submitOnce(ctx, ps, resources, kinds, args, keys, policies, maxAttempts, priorities, ats, delays, tps)
		if err == nil {
			for k := range woken {
				s.hub.Notify(notify.JobKey(k))
			}
			return out, nil
		}
		var pe *pgconn.PgError
		if try < submitTries && errors.As(err, &pe) && (pe.Code == "40P01" ||
			pe.Code == "23505" && pe.ConstraintName == "jobs_idempotency_key") {
			continue
		}
		return nil, err
	}
}

func (s *Store) submitOnce(ctx context.Context, ps []*store.SubmitParams, resources, kinds, args, keys, policies []string,
	maxAttempts, priorities []int32, ats []pgtype.Timestamptz, delays []int64, tps []string) ([]*store.SubmitResult, map[string]bool, error) {
	var b pgx.Batch
	b.Queue(s.sq.lock, resources)
	if len(ps) == 1 {
		b.Queue(s.sq.insertOne, kinds[0], resources[0], args[0], keys[0], policies[0], maxAttempts[0], priorities[0],
			ats[0], delays[0], tps[0])
	} else if rn, first, ok := ranks(ps); ok {
		b.Queue(s.sq.insertNoKeys, kinds, resources, args, policies, maxAttempts, priorities, ats, delays, rn, first, tps)
	} else {
		b.Queue(s.sq.insert, kinds, resources, args, keys, policies, maxAttempts, priorities, ats, delays, tps)
	}
	br := s.pool.SendBatch(ctx, &b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, nil, s.refusal(ps, err)
	}
	var inserted []*store.Job
	known := map[string]*store.Job{}
	woken := map[string]bool{}
	for rows.Next() {
		var existing bool
		var notified int
		j, err := scanJobAfter(rows, &existing, &notified)
		if err != nil {
			rows.Close()
			_ = br.Close()
			return nil, nil, s.refusal(ps, err)
		}
		if existing {
			known[j.IdempotencyKey] = j
			continue
		}
		inserted = append(inserted, j)
		if j.Head {
			woken[j.Kind] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		_ = br.Close()
		return nil, nil, s.refusal(ps, err)
	}
	if err := br.Close(); err != nil {
		return nil, nil, s.refusal(ps, err)
	}
	out, err := alignSubmitted(ps, inserted, known)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range out {
		if r.Existing && r.Job.State == store.JobSuperseded {
			if out[i], err = s.existing(ctx, s.pool, r.Job); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, woken, nil
}

// alignSubmitted puts the statement's jobs in batch order: a key that named a job returns it;
// a key seen earlier in the batch returns that occurrence's job; every other job is the next
// inserted one (their IDs were drawn in batch order).
func alignSubmitted(ps []*store.SubmitParams, inserted []*store.Job, known map[string]*store.Job) ([]*store.SubmitResult, error) {
	slices.SortFunc(inserted, func(a, b *store.Job) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]*store.SubmitResult, len(ps))
	byKey := map[string]*store.Job{}
	next := 0
	for i, p := range ps {
		if k := p.IdempotencyKey; k != "" {
			if j := known[k]; j != nil {
				out[i] = &store.SubmitResult{Job: j, Existing: true}
				continue
			}
			if j := byKey[k]; j != nil {
				out[i] = &store.SubmitResult{Job: j, Existing: true}
				continue
			}
		}
		if next == len(inserted) {
			return nil, fmt.Errorf("submit inserted %d jobs, fewer than the batch needs", len(inserted))
		}
		j := inserted[next]
		next++
		if p.IdempotencyKey != "" {
			byKey[p.IdempotencyKey] = j
		}
		out[i] = &store.SubmitResult{Job: j}
	}
	if next != len(inserted) {
		return nil, fmt.Errorf("submit inserted %d jobs, more than the batch needs (%d)", len(inserted), next)
	}
	return out, nil
}

// ranks numbers, for a batch without idempotency keys, each job's rank within its resource and
// the index of its resource's first job (both from 1, as SQL arrays count); ok is false if the
// batch has a key (then which jobs are inserted depends on the keys the table holds).
func ranks(ps []*store.SubmitParams) (rn, first []int32, ok bool) {
	rn, first = make([]int32, len(ps)), make([]int32, len(ps))
	type seen struct{ first, n int32 }
	byResource := make(map[string]*seen, len(ps))
	for i, p := range ps {
		if p.IdempotencyKey != "" {
			return nil, nil, false
		}
		r := byResource[p.Resource]
		if r == nil {
			r = &seen{first: int32(i + 1)}
			byResource[p.Resource] = r
		}
		r.n++
		rn[i], first[i] = r.n, r.first
	}
	return rn, first, true
}

// refusalRE finds the refusal submitInsertSQL raises (as a failed cast to int, the one way a
// plain SQL statement can fail on purpose and say why): reason, index from 1, head job, state.
var refusalRE = regexp.MustCompile(`baton-batch-refused:(kind|busy|beyond):(\d+):(\d*):([a-z]*)`)

// refusal turns the statement's refusal into a *submitFailure holding the error a single submit
// of the job would give; other errors pass unchanged.
func (s *Store) refusal(ps []*store.SubmitParams, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22P02" {
		return err
	}
	m := refusalRE.FindStringSubmatch(pe.Message)
	if m == nil {
		return err
	}
	idx, _ := strconv.Atoi(m[2])
	if idx < 1 || idx > len(ps) {
		return err
	}
	p := ps[idx-1]
	switch m[1] {
	case "kind":
		return &submitFailure{index: idx - 1, err: unknownKind(p.Kind)}
	case "beyond":
		return errBeyondKind
	}
	head, _ := strconv.ParseInt(m[3], 10, 64)
	return &submitFailure{index: idx - 1,
		err: &store.ResourceBusyError{Resource: p.Resource, HeadJob: head, State: store.JobState(m[4])}}
}
