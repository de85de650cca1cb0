package server

import (
	"time"

	"github.com/batonhq/baton"
)

// hangGuard bounds each wait of the server's tests for a condition (a call queued, a metric
// shown). It is never what a test checks: it only turns a hang into a failure that names what
// was pending. Minutes, so that a loaded machine cannot reach it while things still move.
const hangGuard = 3 * time.Minute

// HangGuard is hangGuard for the package's external tests.
const HangGuard = hangGuard

// SetClaimPoll sets the fallback re-poll of waiting claims, so that a test can make the store's
// wake-up the only way a waiting claim is answered early.
func SetClaimPoll(s *Server, d time.Duration) { s.claimPoll = d }

// SetLockPoll gives the server's Locker the fallback poll d, so that a test can make the store's
// push the only way a waiting acquire is answered early.
func SetLockPoll(s *Server, d time.Duration) {
	l, err := baton.NewLocker(s.st, &baton.Config{Logger: s.log, PollInterval: d})
	if err != nil {
		panic(err)
	}
	s.locker = l
}

// Routes lists the server's endpoints as "METHOD path" with the mux's patterns.
func Routes(s *Server) []string {
	var out []string
	for _, rt := range s.routeTable() {
		out = append(out, rt.method+" "+rt.path)
	}
	// Served by getResource when the key ends in /explain (a wildcard ends its pattern).
	return append(out, "GET /v1/resources/{key...}/explain")
}

// WaitingClaims is the number of named claims waiting in s that POST /v1/jobs/claim/stop can end.
func WaitingClaims(s *Server) int {
	s.claimWaits.mu.Lock()
	defer s.claimWaits.mu.Unlock()
	n := 0
	for _, w := range s.claimWaits.waiting {
		n += w.n
	}
	return n
}
