package server

import (
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// clearRest ends a resting key's cooldown or lock-delay early (admin, audited like a
// force-release: the actor is the token's name, or the caller's word without auth).
func (s *Server) clearRest(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.ForceReleaseRequest
	if !decode(w, r, &req) || reserved(w, "key", req.Key) {
		return
	}
	actor := s.adminActor(who, req.Actor)
	rest, err := s.st.ClearRest(r.Context(), &store.ForceReleaseParams{Key: req.Key, Reason: req.Reason, Actor: actor, Principal: s.owner(who)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("rest cleared", "key", rest.Key, "rest", rest.Reason, "remaining", rest.Remaining,
		"actor", actor, "reason", req.Reason)
	writeJSON(w, http.StatusOK, wire.RestResponse{Rest: wire.Rest{Key: rest.Key, Reason: rest.Reason,
		RemainingMs: rest.Remaining.Milliseconds()}})
}
