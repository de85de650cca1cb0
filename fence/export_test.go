package fence

// MemoryWaiters is how many holders wait to enter resource in s (the tests wait for it).
func MemoryWaiters(s *MemoryStore, resource string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[resource]
	if e == nil {
		return 0
	}
	return e.waiting
}
