// Package notify fans out "key may be free" signals to the goroutines waiting on that key.
package notify

import "sync"

// Hub maps keys to subscribers. The zero value is not usable; call NewHub.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*sub]struct{}
}

type sub struct{ ch chan struct{} }

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: make(map[string]map[*sub]struct{})} }

// Subscribe returns a channel that receives (coalesced, never blocking Notify) after each Notify
// of key, and a cancel function that must be called when the subscriber stops waiting.
func (h *Hub) Subscribe(key string) (<-chan struct{}, func()) {
	s := &sub{ch: make(chan struct{}, 1)}
	h.mu.Lock()
	set := h.subs[key]
	if set == nil {
		set = make(map[*sub]struct{})
		h.subs[key] = set
	}
	set[s] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if set := h.subs[key]; set != nil {
				delete(set, s)
				if len(set) == 0 {
					delete(h.subs, key)
				}
			}
		})
	}
}

// Notify wakes every subscriber of key.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[key] {
		wake(s)
	}
}

// NotifyAll wakes every subscriber of every key, for instance after a lost notification
// connection was re-established and signals may have been missed.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for s := range set {
			wake(s)
		}
	}
}

// Watched reports whether anyone in this process waits on key.
func (h *Hub) Watched(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[key]) > 0
}

func wake(s *sub) {
	select {
	case s.ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}
