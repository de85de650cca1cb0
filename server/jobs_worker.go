package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Remote workers: claim (a long-poll when asked to wait), heartbeat, complete, fail. A job's
// lease lives in the store, as with a local worker: the server keeps nothing per job.

// DefaultJobLeaseTTL is the job lease TTL of a claim or heartbeat that names none (the same as
// baton.DefaultJobLeaseTTL).
const DefaultJobLeaseTTL = 30 * time.Second

// defaultClaimPoll is how often a waiting claim looks again without a wake-up (jittered ±20%):
// the store's wake-ups do not reach this server when another process (a SQLite file shared by
// several servers) makes a job claimable, or when a job becomes due (a delay, a backoff).
const defaultClaimPoll = time.Second

func (s *Server) claimJobs(w http.ResponseWriter, r *http.Request, who principal) {
	received := time.Now() // see acquire: the lower bound of the wait the worker may add
	var req wire.ClaimRequest
	if !decode(w, r, &req) {
		return
	}
	wait, prob := msDuration("wait_ms", req.WaitMs, 24*time.Hour)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p, prob := s.claimParams(&req, who, "")
	if prob == nil {
		prob = waitIDParam("wait_id", req.WaitID, false)
	}
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	var stopped context.Context // ends when POST /v1/jobs/claim/stop names this wait
	if wait > 0 && req.WaitID != "" {
		var done func()
		stopped, done = s.claimWaits.start(waitKey{owner: p.Owner, id: req.WaitID})
		defer done()
	}
	jobs, claimed, err := s.claimWaiting(r.Context(), stopped, p, min(wait, s.cfg.MaxWait))
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away; nothing was claimed for it
		}
		s.writeJobError(w, r, err, "not found")
		return
	}
	resp := wire.JobsResponse{Jobs: wire.JobsFrom(jobs)}
	if len(jobs) > 0 {
		resp.WaitedMs = claimed.Sub(received).Milliseconds()
	}
	writeJSON(w, http.StatusOK, resp)
}

// claimParams checks a claim request's members but its wait (prefix names them in problems:
// "claim." in a batch completion).
func (s *Server) claimParams(req *wire.ClaimRequest, who principal, prefix string) (*store.ClaimParams, *problem) {
	ttl, prob := ttlParam(prefix+"ttl_ms", req.TTLMs, DefaultJobLeaseTTL)
	if prob != nil {
		return nil, prob
	}
	limit := req.Limit
	if limit == 0 {
		limit = 1
	}
	if limit > wire.MaxClaimLimit {
		return nil, invalidArg(prefix+"limit", fmt.Sprintf("must be between 1 and %d (got %d)", wire.MaxClaimLimit, limit))
	}
	p := &store.ClaimParams{Worker: req.Worker, Owner: s.owner(who), Kinds: req.Kinds, Limit: limit, TTL: ttl}
	if err := p.Validate(); err != nil {
		return nil, within(prefix, invalid(err))
	}
	return p, nil
}

// claimWaiting claims; with wait > 0 and nothing claimable, it waits for a wake-up from the
// store (subscribed before the first claim, so that nothing made claimable in between is
// missed) or the fallback re-poll, and claims again, until wait passes (then it returns no
// jobs), stopped ends (nil: never), the client goes away or the server shuts down (no jobs, at
// once). The request's context is checked right before each claim, so that a client that is
// gone gets no job started; a stopped wait still claims once if it had not yet.
func (s *Server) claimWaiting(ctx, stopped context.Context, p *store.ClaimParams, wait time.Duration) (jobs []*store.Job, claimed time.Time, err error) {
	if wait <= 0 {
		if err := ctx.Err(); err != nil {
			return nil, time.Time{}, err
		}
		claimed = time.Now()
		jobs, err = s.jobs.ClaimJobs(ctx, p)
		return jobs, claimed, err
	}
	// One subscription for all the kinds: a wake-up left unread stays with the store, which
	// then wakes another waiter for the next job instead of this one again.
	waiter := notify.NewWaiter(s.jobs.SubscribeJobs(slices.Compact(slices.Sorted(slices.Values(p.Kinds)))...))
	defer waiter.Close()
	// The wait ends at its deadline, at the server's shutdown or when its client stops it; the
	// claims end only with the request.
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	if stopped != nil {
		defer context.AfterFunc(stopped, cancel)()
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, time.Time{}, err
		}
		claimed = time.Now()
		jobs, err = s.jobs.ClaimJobs(ctx, p)
		if err != nil || len(jobs) > 0 {
			return jobs, claimed, err
		}
		if waiter.Wait(waitCtx, retry.Jitter(s.claimPoll)) == notify.Cancelled {
			return nil, time.Time{}, ctx.Err() // nil at the deadline or the shutdown
		}
		// Woken, or the poll: claim again.
	}
}

func (s *Server) heartbeatJob(w http.ResponseWriter, r *http.Request, who principal) {
	id, ok := jobID(w, r)
	if !ok {
		return
	}
	var req wire.HeartbeatRequest
	if !decode(w, r, &req) {
		return
	}
	ttl, prob := ttlParam("ttl_ms", req.TTLMs, DefaultJobLeaseTTL)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p := &store.HeartbeatParams{ID: id, Token: req.Token, Owner: s.owner(who), TTL: ttl}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	res, err := s.jobs.HeartbeatJob(r.Context(), p)
	if err != nil {
		s.writeAttemptError(w, r, err, id, p.Token, p.Owner)
		return
	}
	writeJSON(w, http.StatusOK, wire.HeartbeatResponse{CancelRequested: res.CancelRequested, TTLLeftMs: res.TTLLeft.Milliseconds()})
}

func (s *Server) completeJob(w http.ResponseWriter, r *http.Request, who principal) {
	id, ok := jobID(w, r)
	if !ok {
		return
	}
	var req wire.CompleteRequest
	if !decode(w, r, &req) {
		return
	}
	p := &store.CompleteParams{ID: id, Token: req.Token, Owner: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	j, err := s.jobs.CompleteJob(r.Context(), p)
	if err != nil {
		s.writeAttemptError(w, r, err, id, p.Token, p.Owner)
		return
	}
	s.jobMetrics.attemptEnded(j)
	writeJSON(w, http.StatusOK, wire.JobFrom(j))
}

func (s *Server) failJob(w http.ResponseWriter, r *http.Request, who principal) {
	id, ok := jobID(w, r)
	if !ok {
		return
	}
	var req wire.FailRequest
	if !decode(w, r, &req) {
		return
	}
	retryAfter, prob := msDuration("retry_after_ms", req.RetryAfterMs, store.MaxDelay)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p := &store.FailParams{ID: id, Token: req.Token, Owner: s.owner(who), Code: req.Code, Message: req.Message,
		Permanent: req.Permanent, RetryAfter: retryAfter}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	j, err := s.jobs.FailJob(r.Context(), p)
	if err != nil {
		s.writeAttemptError(w, r, err, id, p.Token, p.Owner)
		return
	}
	s.jobMetrics.attemptEnded(j)
	writeJSON(w, http.StatusOK, wire.JobFrom(j))
}
