package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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

// errBeyondKind: the pipelined submit met a job of a kind with a mode or limits, or of policy
// replace (jobs_replace.go).
var errBeyondKind = errors.New("postgres: a job's kind holds more than its resource")

// submitAny submits ps: in one pipelined statement, unless a job (or, as the statement finds, its
// kind) asks for more than its resource, exclusive, or for policy replace or a debounce: then one
// after the other (submitSlow), each superseding as jobs_replace.go says.
func (s *Store) submitAny(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	for _, p := range ps {
		if p.Beyond() || s.trees.Of(p.Resource) != "" || s.rated.Of(p.Resource) != "" || p.Policy == store.PolicyReplace || p.Debounce != 0 {
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
				res, err := s.submit(ctx, retryTx{Tx: tx, last: try == submitTries}, p)
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
		if err != nil && try < submitTries && (errors.Is(err, errReplaceRaced) || errors.As(err, &pe) && (pe.Code == "40P01" ||
			pe.Code == "23505" && pe.ConstraintName == "jobs_idempotency_key")) {
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

// maxHoldsTries bounds the jobs with holds that one claim tries beyond the slots it fills: each
// try is a transaction of its own (three round trips), and keeps the tickets of a job it cannot
// start alive.
const maxHoldsTries = 8

// holdsCandidate is a claimable head with holds and its kind's guard and timeout, read by the
// holdsHeads statement.
type holdsCandidate struct {
	job          *store.Job
	fromStates   []string
	runningState string
	timeoutMS    int64
	rate         *store.Rate // its kind's, nil if none
}

func (c *holdsCandidate) guarded() bool { return len(c.fromStates) > 0 || c.runningState != "" }

// queueHoldsHeads queues, in a claim's batch, the read of up to limit+maxHoldsTries claimable
// heads with holds of p's kinds, in claim order; *out receives them.
func (s *Store) queueHoldsHeads(b *pgx.Batch, kinds []string, limit int, out *[]*holdsCandidate) {
	b.Queue(s.jq.holdsHeads, kinds, limit+maxHoldsTries).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			c := &holdsCandidate{}
			var rateMax int
			var rateWindowMS int64
			j, err := scanJobAfter(rows, &c.fromStates, &c.runningState, &c.timeoutMS, &rateMax, &rateWindowMS)
			if err != nil {
				return err
			}
			if rateMax > 0 {
				c.rate = &store.Rate{Max: rateMax, Window: time.Duration(rateWindowMS) * time.Millisecond}
			}
			c.job = j
			*out = append(*out, c)
		}
		return rows.Err()
	})
}

// claimHolds tries the candidates in order until it has started room of them: each is granted
// as the lease j.AcquireParams(worker, owner, ttl) would be, at its place in every line (its
// submit), or waits there (its tickets kept alive for the claim's TTL).
func (s *Store) claimHolds(ctx context.Context, p *store.ClaimParams, room int, cands []*holdsCandidate) ([]*store.Job, error) {
	var out []*store.Job
	for _, c := range cands {
		if len(out) == room {
			break
		}
		j, err := s.claimHoldsJob(ctx, p, c)
		if err != nil {
			return out, err
		}
		if j != nil {
			out = append(out, j)
		}
	}
	return out, nil
}

// errJobGone: the candidate is no longer a claimable head (claimed, cancelled or rescheduled
// meanwhile, or locked by a claim in flight).
var errJobGone = errors.New("postgres: the job is no longer a claimable head")

// guardRefusedError: the resource's state does not let the candidate's kind start.
type guardRefusedError struct{ state string }

func (e *guardRefusedError) Error() string { return "resource state " + e.state + " refuses the kind" }

// claimHoldsJob starts candidate c, or leaves it waiting (nil, nil). The transaction locks the
// job's row (skipping it if a claim in flight holds it), its resource's row if its kind is
// guarded (the order of a job's end: job, resource, keys), then the keys and limits as a grant
// beyond one key does.
func (s *Store) claimHoldsJob(ctx context.Context, p *store.ClaimParams, c *holdsCandidate) (*store.Job, error) {
	j := c.job
	ap := j.AcquireParams(p.Worker, p.Owner, p.TTL)
	for attempt := 0; ; attempt++ {
		var started *store.Job
		var woken, missing []string
		err := s.pipeGrant(ctx, j.Resource, func(pt *pipeTx) error {
			started, woken, missing = nil, nil, nil
			var attemptN int
			var resState string
			bj := &beyondJob{arrival: j.CreatedAt}
			bj.pre = func(b *pgx.Batch) {
				if c.rate != nil {
					s.queueRateCheck(b, j, c.rate)
				}
				b.Queue(s.jq.lockHoldsJob, j.ID)
				if c.guarded() {
					b.Queue(s.jq.lockResourceState, j.Resource)
				}
			}
			bj.preRead = func(br pgx.BatchResults) error {
				if c.rate != nil {
					if err := readRateCheck(br, c.rate); err != nil {
						return err
					}
				}
				err := br.QueryRow().Scan(&attemptN)
				if errors.Is(err, pgx.ErrNoRows) {
					return errJobGone
				}
				if err != nil {
					return err
				}
				if c.guarded() {
					if err := br.QueryRow().Scan(&resState); err != nil {
						return err
					}
					if !(len(c.fromStates) == 0 || slices.Contains(c.fromStates, resState) ||
						attemptN > 0 && c.runningState != "" && resState == c.runningState) {
						return &guardRefusedError{state: resState}
					}
				}
				return nil
			}
			bj.granted = func(pt *pipeTx, l *store.Lease, now time.Time) error {
				return pt.batch(ctx, func(b *pgx.Batch) {
					b.Queue(s.jq.startHolds, j.ID, p.Worker, p.Owner, int64(l.Token), now, l.ExpiresAt, c.timeoutMS)
					if c.runningState != "" {
						b.Queue(s.jq.setRunningState, j.Resource, c.runningState)
					}
					if c.rate != nil {
						b.Queue(s.jq.rates.recordAt, store.KindRateScope(j.Kind), j.Resource, c.rate.Window.Milliseconds(), now)
					}
				}, true, func(br pgx.BatchResults) error {
					rows, err := br.Query()
					if err != nil {
						return err
					}
					js, err := collectJobs(rows)
					if err != nil {
						return err
					}
					if len(js) != 1 {
						return errors.New("postgres: the job's row vanished under its lock")
					}
					started = js[0]
					started.Slots = l.Slots
					if c.runningState != "" {
						if _, err := br.Exec(); err != nil {
							return err
						}
					}
					if c.rate != nil {
						if _, err := br.Exec(); err != nil {
							return err
						}
					}
					return nil
				})
			}
			var err error
			_, _, missing, woken, err = s.beyondTx(ctx, pt, ap, nil, bj)
			return err
		})
		var guard *guardRefusedError
		var rated *rateReachedError
		switch {
		case errors.As(err, &rated):
			if _, err := s.pool.Exec(ctx, s.jq.rates.wait, j.ID, rated.next); err != nil {
				return nil, s.jobErr("claim jobs", err)
			}
			return nil, nil
		case errors.Is(err, errUnmarked) && attempt < acquireAttempts:
			for _, k := range missing {
				if err := s.markLockKey(ctx, k); err != nil {
					return nil, s.jobErr("claim jobs", err)
				}
			}
			continue
		case errors.Is(err, errJobGone):
			return nil, nil
		case errors.As(err, &guard):
			return nil, s.rejectHoldsJob(ctx, c)
		case err != nil:
			var inv *store.InvalidArgumentError
			if errors.As(err, &inv) && inv.Field == "limits" {
				// A limit deleted since the submit: the job can never run.
				return nil, s.discardUnknownLimit(ctx, c.job)
			}
			return nil, s.jobErr("claim jobs", err)
		}
		s.wakePayloads(woken)
		return started, nil
	}
}

// rejectHoldsJob discards candidate c, whose kind's guard the resource's state refuses (as the
// claim statement does a plain head's), drops its tickets and promotes its successor.
func (s *Store) rejectHoldsJob(ctx context.Context, c *holdsCandidate) error {
	j := c.job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var attempt int
		err := tx.QueryRow(ctx, s.jq.lockHoldsJob, j.ID).Scan(&attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var state string
		if err := tx.QueryRow(ctx, s.jq.lockResourceState, j.Resource).Scan(&state); err != nil {
			return err
		}
		if len(c.fromStates) == 0 || slices.Contains(c.fromStates, state) ||
			attempt > 0 && c.runningState != "" && state == c.runningState {
			return nil // the state changed meanwhile: the next claim tries it again
		}
		if _, err := tx.Exec(ctx, s.jq.rejectHolds, j.ID, state, c.fromStates); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.hq.dropTickets, store.JobLeaseID(j.ID), j.AcquireParams("", "", 0).Lines()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.jq.lockRejected); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.jq.promoteRejected)
		return err
	})
	if err != nil {
		return s.jobErr("claim jobs", err)
	}
	return nil
}

// heartbeatHolds extends a running attempt with holds: its holds and their keys' summary rows (as
// a renewal of its lease), then the attempt's lease to the holds' new expiry, in one transaction
// that locks the job's row, then its keys' rows. ErrNotHeld if it is not p.Owner's running attempt
// with that token, or its holds have expired.
func (s *Store) heartbeatHolds(ctx context.Context, p *store.HeartbeatParams, cancel *bool, leftUS *int64) error {
	return s.holdTx(ctx, func(tx pgx.Tx) error {
		var resource string
		err := tx.QueryRow(ctx, s.jq.lockHoldsRunning, p.ID, int64(p.Token), p.Owner).Scan(&resource)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotHeld
		}
		if err != nil {
			return err
		}
		l, err := s.renewHoldsTx(ctx, tx, &store.RenewParams{Key: resource, LeaseID: store.JobLeaseID(p.ID), Owner: p.Owner, TTL: p.TTL},
			time.Time{}, false)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, s.jq.heartbeatHolds, p.ID, l.ExpiresAt).Scan(cancel, leftUS)
	})
}

// queueEndJobHolds queues, in the batch that ends the attempts (ids, tokens) after the statements
// that end them, the end of their holds: the rows of their keys locked in key order (after the
// job and resource rows the ends locked, the order of every job path), the holds of the attempts
// that are no longer running ended, their keys' summary rows settled, the fronts of their lines
// and the workers of their keys' ready jobs woken (*woken: the payloads), and so are the fronts
// of the lines related to their keys in trees (whose ancestors' rows are locked too, FOR SHARE,
// as the grant locked them). For attempts without holds, each is an index probe that finds
// nothing.
func (s *Store) queueEndJobHolds(b *pgx.Batch, ids, tokens []int64, woken *[]string) {
	leaseIDs := make([]string, len(ids))
	for i, id := range ids {
		leaseIDs[i] = store.JobLeaseID(id)
	}
	b.Queue(s.hq.lockJobHolds, ids, tokens)
	b.Queue(setNow)
	b.Queue(s.hq.endJobHolds, ids, tokens)
	b.Queue(s.hq.settleJobEnded, leaseIDs)
	b.Queue(s.hq.wakeJobEnded, leaseIDs).Query(func(rows pgx.Rows) error {
		w, err := scanWoken(rows)
		*woken = append(*woken, w...)
		return err
	})
	b.Queue(s.hq.notifyJobsJobEnded, leaseIDs)
	b.Queue(s.hq.wakeRelatedJobEnded, leaseIDs).Query(func(rows pgx.Rows) error {
		w, err := scanWoken(rows)
		*woken = append(*woken, w...)
		return err
	})
	b.Queue(s.hq.notifyRelatedJobEnded, leaseIDs)
}

// discardUnknownLimit ends job j, a claimable head with holds that names a limit deleted since its
// submit, as discarded (store.CodeUnknownLimit), drops its tickets and promotes its successor.
func (s *Store) discardUnknownLimit(ctx context.Context, j *store.Job) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var attempt int
		err := tx.QueryRow(ctx, s.jq.lockHoldsJob, j.ID).Scan(&attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var missing string
		err = tx.QueryRow(ctx, s.jq.unknownLimit, j.Limits).Scan(&missing)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // created again meanwhile
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.jq.lockFinished, j.ID); err != nil {
			return err
		}
		msg := fmt.Sprintf("limit %q was deleted after the job was submitted", missing)
		if _, err := tx.Exec(ctx, s.jq.discardJob, j.ID, store.CodeUnknownLimit, msg); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.jq.dropJobTickets, store.JobLeaseID(j.ID)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.jq.promoteFinished, j.ID)
		return err
	})
	if err != nil {
		return s.jobErr("claim jobs", err)
	}
	s.hub.Notify(notify.JobKey(j.Kind))
	return nil
}
