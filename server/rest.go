package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

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
	rest, err := s.st.ClearRest(r.Context(), &store.ClearRestParams{Key: req.Key, Reason: req.Reason, Actor: actor, Principal: s.owner(who)})
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, newProblem(http.StatusNotFound, "not_found", s.notResting(r.Context(), req.Key)))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("rest cleared", "key", rest.Key, "rest", rest.Reason, "remaining", rest.Remaining,
		"actor", actor, "reason", req.Reason)
	writeJSON(w, http.StatusOK, wire.RestResponse{Rest: wire.Rest{Key: rest.Key, Reason: rest.Reason,
		RemainingMs: rest.Remaining.Milliseconds()}})
}

// notResting says why key has no rest to clear: it is free, or held (by whom, and what to do).
// The store's answer does not tell the two apart, so the key is read again: a detail for people,
// which a change in between may make stale.
func (s *Server) notResting(ctx context.Context, key string) string {
	if l, err := s.st.Get(ctx, key); err == nil {
		return fmt.Sprintf("key %q is not resting: it is held by %s (token %d) until %s; force-release it first, which starts its lock-delay",
			key, l.Holder, l.Token, l.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("key %q is not resting: it is free, with no cooldown or lock-delay to clear", key)
}
