package server

import (
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// checkFence raises a resource's fence to the token presented, or refuses a stale token with
// 409 stale_token (resource, token, current_token): `baton fence check`.
func (s *Server) checkFence(w http.ResponseWriter, r *http.Request, _ principal) {
	f, ok := s.cfg.Store.(store.Fencer)
	if !ok {
		writeProblem(w, newProblem(http.StatusNotImplemented, "not_implemented",
			fmt.Sprintf("this server's store (%s) keeps no fences", s.cfg.StoreName)))
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
