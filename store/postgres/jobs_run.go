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

// ClaimJobs starts up to p.Limit claimable heads. One round trip: the claim statement and the
// promotion of the successors of guard-refused heads go in one batch, which PostgreSQL runs as
// one implicit transaction (each statement with a fresh snapshot). When it finds fewer jobs than
// asked, it marks the kinds as having a waiting worker, so that the next submit or promotion
// NOTIFYs, and claims once more, in case a job arrived before the mark.
func (s *Store) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.claims.Saw(p.Kinds, time.Now())
	tried := map[int64]bool{} // the jobs with holds tried once: not again in the second claim
	jobs, err := s.claim(ctx, p, p.Limit, tried)
	if err != nil || len(jobs) == p.Limit {
		return jobs, err
	}
	tag, err := s.pool.Exec(ctx, s.jq.markWaiting, p.Kinds)
	if err != nil {
		return nil, s.jobErr("claim jobs", err)
	}
	if tag.RowsAffected() == 0 {
		return jobs, nil
	}
	more, err := s.claim(ctx, p, p.Limit-len(jobs), tried)
	if err != nil {
		// The first claim's jobs are started: hand them out; the error comes back next time.
		return jobs, nil
	}
	return append(jobs, more...), nil
}

// claim starts up to limit claimable heads in one batch (one round trip) when none with holds
// waits: the read of the claimable heads with holds, then the claim statement, which starts
// plain heads only if that read found none. Jobs with holds go first, in claim order, so that
// each is granted, or takes its place in its lines (at its submit), before the plain heads on
// its keys are considered: if there are some, they are tried (claimHolds, one transaction each;
// tried: the ones this call tried already), then the claim statement runs again for the rest.
func (s *Store) claim(ctx context.Context, p *store.ClaimParams, limit int, tried map[int64]bool) ([]*store.Job, error) {
	b := &pgx.Batch{}
	var jobs []*store.Job
	var cands []*holdsCandidate
	var rated []*ratedHead
	s.queueHoldsHeads(b, p.Kinds, limit, &cands)
	s.queueRatedHeads(b, p.Kinds, limit, &rated)
	s.queueClaim(b, p, limit, false, &jobs)
	c, err := s.grantConn(ctx, "")
	var rest *store.RestingError
	if errors.As(err, &rest) {
		return nil, nil // no attempt starts during a failover quarantine (failover.go)
	}
	if err != nil {
		return nil, s.jobErr("claim jobs", err)
	}
	err = c.SendBatch(ctx, b).Close()
	c.Release()
	if err != nil {
		return nil, s.jobErr("claim jobs", err)
	}
	jobs, err = s.claimRest(ctx, p, limit, jobs, cands, tried)
	if err != nil || len(rated) == 0 || len(jobs) >= limit {
		return jobs, err
	}
	more, err := s.claimRated(ctx, p, limit-len(jobs), rated)
	jobs = append(jobs, more...)
	if err != nil && len(jobs) == 0 {
		return nil, err
	}
	return jobs, nil
}

// queueClaim queues the claim statement for plain heads (which starts none, unless holdsTried,
// while a claimable head with holds of p's kinds waits) and the promotion of the successors of
// the heads its guard refused; *out receives the jobs it started.
func (s *Store) queueClaim(b *pgx.Batch, p *store.ClaimParams, limit int, holdsTried bool, out *[]*store.Job) {
	b.Queue(s.jq.claim, p.Kinds, limit, p.Worker, p.TTL.Milliseconds(), p.Owner, holdsTried).Query(func(rows pgx.Rows) error {
		var err error
		*out, err = collectJobs(rows)
		return err
	})
	b.Queue(s.jq.lockRejected)
	b.Queue(s.jq.promoteRejected)
}

// claimRest follows a batch that read the candidates with holds and ran the claim statement
// (jobs: what it started): if there were candidates, it tries those not tried yet, then runs the
// claim statement again for the plain heads, up to limit in all. Jobs started are handed out even
// if a later step fails.
func (s *Store) claimRest(ctx context.Context, p *store.ClaimParams, limit int, jobs []*store.Job,
	cands []*holdsCandidate, tried map[int64]bool) ([]*store.Job, error) {
	if len(cands) == 0 || len(jobs) >= limit {
		return jobs, nil
	}
	var todo []*holdsCandidate
	for _, c := range cands {
		if tried == nil || !tried[c.job.ID] {
			todo = append(todo, c)
			if tried != nil {
				tried[c.job.ID] = true
			}
		}
	}
	more, err := s.claimHolds(ctx, p, limit-len(jobs), todo)
	jobs = append(jobs, more...)
	if err != nil || len(jobs) >= limit {
		if len(jobs) > 0 {
			return jobs, nil
		}
		return nil, err
	}
	b := &pgx.Batch{}
	var plain []*store.Job
	s.queueClaim(b, p, limit-len(jobs), true, &plain)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		if len(jobs) > 0 {
			return jobs, nil
		}
		return nil, s.jobErr("claim jobs", err)
	}
	return append(jobs, plain...), nil
}

// HeartbeatJob extends the running attempt's lease, if the attempt is p.Owner's.
func (s *Store) HeartbeatJob(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res store.HeartbeatResult
	var leftUS int64
	err := s.pool.QueryRow(ctx, s.jq.heartbeat, p.ID, int64(p.Token), p.TTL.Milliseconds(), p.Owner).Scan(&res.CancelRequested, &leftUS)
	if errors.Is(err, pgx.ErrNoRows) {
		// Not a running attempt without holds: perhaps one with holds.
		err = s.heartbeatHolds(ctx, p, &res.CancelRequested, &leftUS)
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, store.ErrNotHeld) {
		return nil, fmt.Errorf("postgres: heartbeat job %d token %d: %w", p.ID, p.Token, store.ErrNotHeld)
	}
	if err != nil {
		return nil, s.jobErr("heartbeat job", err)
	}
	res.TTLLeft = time.Duration(leftUS) * time.Microsecond
	return &res, nil
}

// CompleteJob ends the running attempt as succeeded.
func (s *Store) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.finish(ctx, "complete job", p.ID, p.Token, p.Owner, true, "", "", false, 0, false)
}

// FailJob ends the running attempt with an error.
func (s *Store) FailJob(ctx context.Context, p *store.FailParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.finish(ctx, "fail job", p.ID, p.Token, p.Owner, false, p.Code, p.Message, p.Permanent, p.RetryAfter, false)
}

// finish runs finishSQL, then locks the job's resource and promotes its next job, in one batch
// (one implicit transaction, one round trip). The resource lock comes after the job lock, the
// order claims keep too. The attempt must be owner's, unless reap.
func (s *Store) finish(ctx context.Context, op string, id int64, token uint64, owner string, ok bool, code, msg string,
	permanent bool, retryAfter time.Duration, reap bool) (*store.Job, error) {
	b := &pgx.Batch{}
	var j *store.Job
	b.Queue(s.jq.finish, id, int64(token), ok, code, msg, permanent, retryAfter.Milliseconds(), reap, owner).
		Query(func(rows pgx.Rows) error {
			js, err := collectJobs(rows)
			if len(js) == 1 {
				j = js[0]
			}
			return err
		})
	// finishSQL updated or locked the resource row whenever it ended the attempt, so the
	// resource is locked before promoteFinished takes its snapshot.
	b.Queue(s.jq.promoteFinished, id)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, s.jobErr(op, err)
	}
	if j == nil {
		return nil, fmt.Errorf("postgres: %s %d token %d: %w", op, id, token, store.ErrNotHeld)
	}
	if j.Beyond() {
		s.endJobHolds(ctx, []int64{id}, []int64{int64(token)})
	}
	s.wakeLocal(j)
	return j, nil
}

// endJobHolds ends the holds of the ended attempts (ids, tokens) in a batch of their own, right
// after the batch that ended them, and wakes their lines: a plain job's end pays nothing for
// holds. If it fails (or the process dies first), the holds end when they expire, with the
// attempt's lease; until then they keep their keys and units, which is safe and only slower.
func (s *Store) endJobHolds(ctx context.Context, ids, tokens []int64) {
	b := &pgx.Batch{}
	var woken []string
	s.queueEndJobHolds(b, ids, tokens, &woken)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return // the attempts ended; their holds end when they expire
	}
	s.wakePayloads(woken)
}

// wakeLocal signals this process's workers: a retryable job due now, or (cheaply, as a hint) any
// kind after a job ended, since a successor may have been promoted.
func (s *Store) wakeLocal(j *store.Job) {
	s.hub.Notify(notify.JobKey(j.Kind))
}

// CompleteMany completes many attempts in one round trip (one statement, one promotion, one
// commit): the result is aligned with ps, nil where the attempt was no longer running with that
// token or is another owner's (ErrNotHeld for CompleteJob). A worker pool calls it with the attempts that ended while
// its previous completion was in flight.
func (s *Store) CompleteMany(ctx context.Context, ps []*store.CompleteParams) ([]*store.Job, error) {
	done, _, err := s.completeAndClaim(ctx, ps, nil)
	return done, err
}

// CompleteManyAndClaim is CompleteMany followed by a claim, in the same batch: one implicit
// transaction, one commit, one round trip. The claim statement takes its snapshot after the
// promotion, so it sees the successors just promoted.
func (s *Store) CompleteManyAndClaim(ctx context.Context, ps []*store.CompleteParams, claim *store.ClaimParams) ([]*store.Job, []*store.Job, error) {
	if err := claim.Validate(); err != nil {
		return nil, nil, err
	}
	return s.completeAndClaim(ctx, ps, claim)
}

func (s *Store) completeAndClaim(ctx context.Context, ps []*store.CompleteParams, claim *store.ClaimParams) ([]*store.Job, []*store.Job, error) {
	ids := make([]int64, len(ps))
	tokens := make([]int64, len(ps))
	owners := make([]string, len(ps))
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, nil, err
		}
		ids[i], tokens[i], owners[i] = p.ID, int64(p.Token), p.Owner
	}
	out := make([]*store.Job, len(ps))
	if len(ps) == 0 && claim == nil {
		return out, nil, nil
	}
	var done, claimed []*store.Job
	var cands []*holdsCandidate
	var rated []*ratedHead
	for try := 1; ; try++ {
		done, claimed, cands, rated = nil, nil, nil, nil
		b := &pgx.Batch{}
		if len(ps) > 0 {
			b.Queue(s.jq.completeMany, ids, tokens, owners).Query(func(rows pgx.Rows) error {
				var err error
				done, err = collectJobs(rows)
				return err
			})
			b.Queue(s.jq.promoteMany, ids)
		}
		if claim != nil {
			s.queueHoldsHeads(b, claim.Kinds, claim.Limit, &cands)
			s.queueRatedHeads(b, claim.Kinds, claim.Limit, &rated)
			s.queueClaim(b, claim, claim.Limit, false, &claimed)
		}
		err := s.pool.SendBatch(ctx, b).Close()
		// Shared jobs of one resource can end in two batches at once, each locking the
		// resources of its jobs: two batches with two such resources in common may deadlock,
		// and the one PostgreSQL aborts (rolled back whole) goes again.
		var pe *pgconn.PgError
		if err != nil && try < 3 && errors.As(err, &pe) && pe.Code == "40P01" {
			continue
		}
		if err != nil {
			return nil, nil, s.jobErr("complete jobs", err)
		}
		break
	}
	var holdIDs, holdTokens []int64
	for _, j := range done {
		if j.Beyond() {
			i := slices.Index(ids, j.ID)
			holdIDs, holdTokens = append(holdIDs, j.ID), append(holdTokens, tokens[i])
		}
	}
	if len(holdIDs) > 0 {
		s.endJobHolds(ctx, holdIDs, holdTokens)
	}
	if claim != nil {
		claimed, _ = s.claimRest(ctx, claim, claim.Limit, claimed, cands, nil)
		if len(rated) > 0 && len(claimed) < claim.Limit {
			more, _ := s.claimRated(ctx, claim, claim.Limit-len(claimed), rated)
			claimed = append(claimed, more...)
		}
	}
	byID := make(map[int64]*store.Job, len(done))
	for _, j := range done {
		byID[j.ID] = j
	}
	for i, p := range ps {
		if j := byID[p.ID]; j != nil && j.Token == p.Token && j.Owner == p.Owner {
			out[i] = j
			s.wakeLocal(j)
		}
	}
	return out, claimed, nil
}
