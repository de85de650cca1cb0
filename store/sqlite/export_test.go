package sqlite

// PendingRenewals is how many renewals wait in the batch that new ones join.
func PendingRenewals(s *Store) int {
	s.renews.mu.Lock()
	defer s.renews.mu.Unlock()
	if s.renews.pending == nil {
		return 0
	}
	return len(s.renews.pending.reqs)
}
