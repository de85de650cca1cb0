// Package notify fans out "key may be free" signals to the goroutines waiting on that key.
package notify

import (
	"slices"
	"sync"
)

// Hub maps keys to subscribers. Notify wakes one subscriber of a key, the one that subscribed
// first among those without a wake-up pending: only one waiter can win a freed key, so waking
// them all would only make them queue on the store. A subscriber that leaves passes a wake-up on
// to the next, so a wake-up is never lost with a waiter that gave up. The zero value is not
// usable; call NewHub.
type Hub struct {
	mu   sync.Mutex
	subs map[string][]*sub // in subscription order
}

type sub struct {
	ch chan struct{}
	id string // the waiter's name in the store's line (a lease ID); "" if none
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: make(map[string][]*sub)} }

// Subscribe returns a channel that receives (coalesced, never blocking Notify) when this
// subscriber is woken for any of keys, and a cancel function that must be called when it stops
// waiting. One channel serves all the keys: while a wake-up is pending on it, the subscriber
// counts as woken for each of them, and the next wake-up of any of them goes to another
// subscriber; nobody needs to merge channels.
func (h *Hub) Subscribe(keys ...string) (<-chan struct{}, func()) {
	return h.SubscribeAs("", keys...)
}

// SubscribeAs is Subscribe for a waiter that has a name in the store's line (the lease ID of its
// ticket), so that NotifyID can wake exactly the waiter at the front of a key's line.
func (h *Hub) SubscribeAs(id string, keys ...string) (<-chan struct{}, func()) {
	s := &sub{ch: make(chan struct{}, 1), id: id}
	h.mu.Lock()
	for _, key := range keys {
		h.subs[key] = append(h.subs[key], s)
	}
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, key := range keys {
				h.leave(key, s)
			}
		})
	}
}

// leave removes s from key's subscribers.
func (h *Hub) leave(key string, s *sub) {
	list := h.subs[key]
	i := slices.Index(list, s)
	if i < 0 {
		return
	}
	list = append(list[:i:i], list[i+1:]...)
	if len(list) == 0 {
		delete(h.subs, key)
		return
	}
	h.subs[key] = list
	// The leaver may have taken a wake-up it will not act on: pass one on. A spurious wake-up
	// costs one acquire attempt; a lost one costs a poll interval.
	wakeOne(list)
}

// Notify wakes one subscriber of key.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wakeOne(h.subs[key])
}

// NotifyID wakes the subscriber of key named id, the waiter at the front of the key's line, and
// reports whether this hub has one. A store whose line says who is next wakes that waiter only:
// waking another would cost it an attempt the line refuses, and the front a poll interval.
func (h *Hub) NotifyID(key, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs[key] {
		if s.id == id {
			wake(s)
			return true
		}
	}
	return false
}

// NotifyAll wakes every subscriber of every key, for instance after a lost notification
// connection was re-established and signals may have been missed, or when the store closes.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range h.subs {
		for _, s := range list {
			wake(s)
		}
	}
}

func wakeOne(list []*sub) {
	for _, s := range list {
		if len(s.ch) == 0 {
			wake(s)
			return
		}
	}
}

func wake(s *sub) {
	select {
	case s.ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// JobKey is the hub key under which a store signals that a job of kind may be claimable. Lease
// keys cannot contain control characters, so it never collides with one.
func JobKey(kind string) string { return "\x1fjob:" + kind }

// JobKeys is JobKey of each kind.
func JobKeys(kinds []string) []string {
	keys := make([]string, len(kinds))
	for i, k := range kinds {
		keys[i] = JobKey(k)
	}
	return keys
}
