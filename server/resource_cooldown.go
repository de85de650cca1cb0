package server

import (
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// clearResourceCooldown is POST /v1/resources/{key}/clear-cooldown (admin): it ends a resource's
// cooldown (store.Kind.ResourceCooldown) early and answers what was cleared; 404 if the
// resource is not cooling down. The audit log names the token (or, without auth, the caller's
// actor) and the reason.
func (s *Server) clearResourceCooldown(w http.ResponseWriter, r *http.Request, who principal) {
	key, ok := resourceKey(w, r, "/clear-cooldown", "clear a resource's cooldown with POST /v1/resources/{key}/clear-cooldown")
	if !ok {
		return
	}
	var req wire.ClearCooldownRequest
	if !decode(w, r, &req) || reserved(w, "key", key) {
		return
	}
	actor := s.adminActor(who, req.Actor)
	p := &store.ClearCooldownParams{Resource: key, Reason: req.Reason, Actor: actor, Principal: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	c, err := s.jobs.ClearResourceCooldown(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, fmt.Sprintf("resource %q is not cooling down", key))
		return
	}
	s.log.Info("resource cooldown cleared", "resource", key, "until", c.Until, "remaining", c.Left, "job", c.Job,
		"actor", actor, "reason", req.Reason)
	writeJSON(w, http.StatusOK, wire.ResourceCooldownFrom(c))
}
