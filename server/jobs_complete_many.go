package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// completeJobs completes up to wire.MaxClaimLimit attempts of the caller's, and, if asked,
// claims jobs in the same transaction (POST /v1/jobs/complete): a worker over HTTP reports a
// batch and takes the next jobs in one round trip, as an in-process worker does. An attempt that
// is not running with that token, or is another owner's, is null in the answer (a single
// completion would answer 404 or 409): the others complete all the same.
func (s *Server) completeJobs(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.CompleteManyRequest
	if !decode(w, r, &req) {
		return
	}
	if n := len(req.Completions); n < 1 || n > wire.MaxClaimLimit {
		writeProblem(w, invalidArg("completions", fmt.Sprintf("must hold between 1 and %d attempts (got %d)", wire.MaxClaimLimit, n)))
		return
	}
	owner := s.owner(who)
	ps := make([]*store.CompleteParams, len(req.Completions))
	for i, c := range req.Completions {
		field := fmt.Sprintf("completions[%d]", i)
		switch {
		case c.ID <= 0:
			writeProblem(w, invalidArg(field+".id", fmt.Sprintf("must be a positive job ID (got %d)", c.ID)))
			return
		case c.Token == 0:
			writeProblem(w, invalidArg(field+".token", "must be the attempt's token, a positive integer"))
			return
		}
		ps[i] = &store.CompleteParams{ID: c.ID, Token: c.Token, Owner: owner}
		if err := ps[i].Validate(); err != nil {
			writeProblem(w, within(field+".", invalid(err)))
			return
		}
	}
	var claim *store.ClaimParams
	if c := req.Claim; c != nil {
		var prob *problem
		cr := &wire.ClaimRequest{Worker: c.Worker, Kinds: c.Kinds, Limit: c.Limit, TTLMs: c.TTLMs}
		if claim, prob = s.claimParams(cr, who, "claim."); prob != nil {
			writeProblem(w, prob)
			return
		}
	}
	done, claimed, err := s.completeMany(r, ps, claim)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	resp := wire.CompleteManyResponse{Completed: make([]*wire.Job, len(done)), Claimed: wire.JobsFrom(claimed)}
	for i, j := range done {
		if j != nil {
			s.jobMetrics.attemptEnded(j)
			wj := wire.JobFrom(j)
			resp.Completed[i] = &wj
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// within names a problem's field as a member of the request member prefix names.
func within(prefix string, p *problem) *problem {
	if p.Field == "" {
		return p
	}
	return invalidArg(prefix+p.Field, p.Rule)
}

// completeMany completes ps (and claims) in one round trip where the store can, and otherwise
// one attempt at a time, then the claim.
func (s *Server) completeMany(r *http.Request, ps []*store.CompleteParams, claim *store.ClaimParams) (done, claimed []*store.Job, err error) {
	ctx := r.Context()
	if cc, ok := s.jobs.(store.CompleteClaimer); ok && claim != nil {
		return cc.CompleteManyAndClaim(ctx, ps, claim)
	}
	if mc, ok := s.jobs.(store.ManyCompleter); ok {
		done, err = mc.CompleteMany(ctx, ps)
	} else {
		done = make([]*store.Job, len(ps))
		for i, p := range ps {
			j, err := s.jobs.CompleteJob(ctx, p)
			switch {
			case errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound):
			case err != nil:
				return nil, nil, err
			default:
				done[i] = j
			}
		}
	}
	if err != nil || claim == nil {
		return done, nil, err
	}
	// The completions are done: a failed claim is not theirs to report.
	claimed, _ = s.jobs.ClaimJobs(ctx, claim)
	return done, claimed, nil
}
