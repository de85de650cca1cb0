package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// fencer is the server's store as a store.Fencer, or false after answering 501.
func (s *Server) fencer(w http.ResponseWriter) (store.Fencer, bool) {
	f, ok := s.cfg.Store.(store.Fencer)
	if !ok {
		writeProblem(w, newProblem(http.StatusNotImplemented, "not_implemented",
			fmt.Sprintf("this server's store (%s) keeps no fences", s.cfg.StoreName)))
	}
	return f, ok
}

// checkFence raises a resource's fence to the token presented, or refuses a stale token with
// 409 stale_token (resource, token, current_token): `baton fence check`.
func (s *Server) checkFence(w http.ResponseWriter, r *http.Request, _ principal) {
	f, ok := s.fencer(w)
	if !ok {
		return
	}
	var req wire.FenceCheckRequest
	if !decode(w, r, &req) {
		return
	}
	stored, err := do(s.gate, r.Context(), classNew, func() (uint64, error) {
		return f.CheckFence(r.Context(), req.Resource, req.Token)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if stored > req.Token {
		p := newProblem(http.StatusConflict, "stale_token", fmt.Sprintf(
			"stale fencing token %d for resource %q: token %d has been seen; the holder of %d has lost its lease",
			req.Token, req.Resource, stored, req.Token))
		p.Resource, p.Token, p.CurrentToken = req.Resource, req.Token, stored
		writeProblem(w, p)
		return
	}
	writeJSON(w, http.StatusOK, wire.FenceCheckResponse{Resource: req.Resource, Token: stored})
}

// resetFence is DELETE /v1/fences/{resource}?reason=TEXT (admin): it deletes the resource's
// fence, so that the next check accepts any token the store has issued, and answers the token
// the fence held; 404 if the resource has no fence. The audit log names the token (or, without
// auth, the caller's actor parameter) and the reason.
func (s *Server) resetFence(w http.ResponseWriter, r *http.Request, who principal) {
	s.resetFenceOf(w, r, r.PathValue("resource"), who)
}

func (s *Server) resetFenceOf(w http.ResponseWriter, r *http.Request, resource string, who principal) {
	f, ok := s.fencer(w)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "a fence reset", "reason", "actor")
	if !ok {
		return
	}
	p := &store.ResetFenceParams{Resource: resource, Reason: q.Get("reason"), Actor: s.adminActor(who, q.Get("actor")), Principal: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	// An admin's repair, like a force-release: never shed for time.
	token, err := do(s.gate, r.Context(), classKeep, func() (uint64, error) { return f.ResetFence(r.Context(), p) })
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, newProblem(http.StatusNotFound, "not_found", fmt.Sprintf("resource %q has no fence", resource)))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("fence reset", "resource", resource, "token", token, "actor", p.Actor, "reason", p.Reason)
	writeJSON(w, http.StatusOK, wire.FenceResetResponse{Resource: resource, Token: token})
}
