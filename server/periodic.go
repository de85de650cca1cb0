package server

import (
	"net/http"
	"time"

	"github.com/batonhq/baton/internal/wire"
)

// listPeriodic lists the periodic jobs this server submits when it is the maintenance leader,
// each with the start of its next period. The list is this server's configuration (serve's
// --periodic-file): servers on one store are expected to share it, and the leader's is the one
// that runs.
func (s *Server) listPeriodic(w http.ResponseWriter, _ *http.Request, _ principal) {
	now := time.Now()
	resp := wire.PeriodicResponse{Periodic: make([]wire.PeriodicJob, 0, len(s.cfg.Periodic))}
	for i := range s.cfg.Periodic {
		next, _ := s.cfg.Periodic[i].NextRun(now) // New validated every schedule
		resp.Periodic = append(resp.Periodic, wire.PeriodicFrom(&s.cfg.Periodic[i], next))
	}
	writeJSON(w, http.StatusOK, resp)
}
