package server

import (
	"errors"
	"net/http"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Explain: why a resource is not granted now, or a job does not run now (baton.Explanation).

// explainJob is GET /v1/jobs/{id}/explain.
func (s *Server) explainJob(w http.ResponseWriter, r *http.Request, _ principal) {
	id, ok := jobID(w, r)
	if !ok {
		return
	}
	e, err := baton.ExplainJob(r.Context(), s.jobs, id)
	if errors.Is(err, baton.ErrNoLine) {
		writeProblem(w, noLine())
		return
	}
	if err != nil {
		s.writeJobError(w, r, err, noJob(id))
		return
	}
	writeJSON(w, http.StatusOK, wire.ExplanationFrom(e))
}

// explainResource is GET /v1/resources/{key}/explain.
func (s *Server) explainResource(w http.ResponseWriter, r *http.Request, key string) {
	if err := store.ValidateKey(key); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	e, err := s.locker.Explain(r.Context(), key)
	if errors.Is(err, baton.ErrNoLine) {
		writeProblem(w, noLine())
		return
	}
	if err != nil {
		s.writeJobError(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, wire.ExplanationFrom(e))
}

func noLine() *problem {
	return newProblem(http.StatusNotImplemented, "not_implemented",
		"this server's store keeps no line per resource (only SQLite and PostgreSQL do): there is nothing to explain")
}
