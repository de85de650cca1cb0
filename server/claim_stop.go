package server

import (
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
)

// A worker shutting down ends the wait of its claim with POST /v1/jobs/claim/stop rather than by
// abandoning the claim's request. An abandoned request cannot be answered: a job the store
// claimed for it in the instant the worker gave up would stay running with nobody to run it
// until its lease expired, and then be reaped as a timed-out attempt. A stopped wait answers
// like one that ran out: the jobs claimed, maybe none, to a client still reading.

// waitIDParam checks a wait_id: empty (not named) or 1-64 of A-Z a-z 0-9 _ -.
func waitIDParam(field, id string, required bool) *problem {
	if id == "" {
		if required {
			return invalidArg(field, "must not be empty")
		}
		return nil
	}
	if len(id) > wire.MaxWaitIDLen {
		return invalidArg(field, fmt.Sprintf("must be at most %d bytes (got %d)", wire.MaxWaitIDLen, len(id)))
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return invalidArg(field, fmt.Sprintf("must hold only A-Z a-z 0-9 _ - (got %q)", r))
		}
	}
	return nil
}

// stopClaimWait ends the wait of the caller's claim named wait_id (POST /v1/jobs/claim/stop).
func (s *Server) stopClaimWait(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.ClaimStopRequest
	if !decode(w, r, &req) {
		return
	}
	if prob := waitIDParam("wait_id", req.WaitID, true); prob != nil {
		writeProblem(w, prob)
		return
	}
	stopped := s.claimWaits.stop(waitKey{owner: s.owner(who), id: req.WaitID}) != nil
	writeJSON(w, http.StatusOK, wire.ClaimStopResponse{Stopped: stopped})
}
