package server

import "time"

// SetClaimPoll sets the fallback re-poll of waiting claims, so that a test can make the store's
// wake-up the only way a waiting claim is answered early.
func SetClaimPoll(s *Server, d time.Duration) { s.claimPoll = d }

// Routes lists the server's endpoints as "METHOD path" with the mux's patterns.
func Routes(s *Server) []string {
	var out []string
	for _, rt := range s.routeTable() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}
