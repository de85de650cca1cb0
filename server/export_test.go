package server

import "time"

// SetClaimPoll sets the fallback re-poll of waiting claims, so that a test can make the store's
// wake-up the only way a waiting claim is answered early.
func SetClaimPoll(s *Server, d time.Duration) { s.claimPoll = d }
