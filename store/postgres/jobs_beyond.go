package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// Jobs beyond one key (store/jobs_holds.go, migrations/0013_jobs_holds.sql). A job that holds its
// resource shared, holds extra resources or takes limits (jobs.holds) is submitted by the slower
// submit of one job at a time (submit), which resolves its kind's mode and limit templates and
// checks that its limits exist; the pipelined submit statements refuse a job of a kind with a mode
// or limits ("beyond"), and the batch goes the slower way. Its attempts are granted by the holds
// claim (claimHolds) as a lease of store.Job.AcquireParams would be, and the end of an attempt
// ends its holds in the statement batch that ends the attempt.

// errBeyondKind: the pipelined submit met a job of a kind with a mode or limits.
var errBeyondKind = errors.New("postgres: a job's kind holds more than its resource")

// submitAny submits ps: in one pipelined statement, unless a job (or, as the statement finds, its
// kind) asks for more than its resource, exclusive.
func (s *Store) submitAny(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	for _, p := range ps {
		if p.Beyond() {
			return s.submitSlow(ctx, ps)
		}
	}
	out, err := s.submitMany(ctx, ps)
	if errors.Is(err, errBeyondKind) {
		return s.submitSlow(ctx, ps)
	}
	return out, err
}

// submitSlow submits ps one after the other with submit, in one transaction, retried if it
// deadlocks with another (each submit locks its resource as it goes) or loses an idempotency key
// race. A job it refuses is a *submitFailure.
func (s *Store) submitSlow(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	for try := 1; ; try++ {
		out := make([]*store.SubmitResult, len(ps))
		var fail *submitFailure
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			fail = nil
			for i, p := range ps {
				res, err := s.submit(ctx, tx, p)
				if err != nil {
					if isStoreAnswer(err) {
						fail = &submitFailure{index: i, err: err}
						return fail
					}
					return err
				}
				out[i] = res
			}
			return nil
		})
		if fail != nil {
			return nil, fail
		}
		var pe *pgconn.PgError
		if err != nil && try < submitTries && errors.As(err, &pe) && (pe.Code == "40P01" ||
			pe.Code == "23505" && pe.ConstraintName == "jobs_idempotency_key") {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, r := range out {
			if !r.Existing && r.Job.Head {
				s.hub.Notify(notify.JobKey(r.Job.Kind))
			}
		}
		return out, nil
	}
}

// isStoreAnswer reports whether err is the store's answer to a submit rather than a failure.
func isStoreAnswer(err error) bool {
	var inv *store.InvalidArgumentError
	var busy *store.ResourceBusyError
	return errors.As(err, &inv) || errors.As(err, &busy)
}
