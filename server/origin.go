package server

import "net/http"

// crossOrigin refuses a state-changing request that a browser sent from another site's page
// (net/http's check: Sec-Fetch-Site, else Origin against Host). Bearer tokens are never sent by
// a browser on its own, but a server without --auth-file treats every caller as admin, and a
// POST without a body needs no CORS preflight: without this, any web page open in a browser on
// the server's machine could cancel jobs on a loopback server. Clients that are not browsers
// send neither header and are not affected.
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin answers 403 and returns false for a cross-origin browser request.
func (s *Server) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if err := crossOrigin.Check(r); err != nil {
		s.refusals.refused(r, reasonCrossOrigin, "")
		writeProblem(w, newProblem(http.StatusForbidden, "forbidden",
			"cross-origin request refused: a page of another site may not change Baton's state"))
		return false
	}
	return true
}
