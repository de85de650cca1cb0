package notify

import "testing"

func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotifyWakesOldestIdleSubscriber(t *testing.T) {
	h := NewHub()
	a, cancelA := h.Subscribe("k")
	b, cancelB := h.Subscribe("k")
	other, cancelOther := h.Subscribe("other")
	defer cancelOther()
	h.Notify("k")
	if len(a) != 1 || len(b) != 0 || len(other) != 0 {
		t.Fatalf("after one Notify: a=%d b=%d other=%d, want only a woken", len(a), len(b), len(other))
	}
	h.Notify("k") // a still has one pending: b is next
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("after two Notifies: a=%d b=%d, want both woken", len(a), len(b))
	}
	pending(a)
	pending(b)
	// a leaves: its wake-up passes to b.
	cancelA()
	if !pending(b) {
		t.Fatal("b not woken when a left")
	}
	cancelB()
	if list, ok := h.subs["k"]; ok {
		t.Fatalf("key k still has subscribers after every one left: %v", list)
	}
	h.Notify("k") // nobody: must not panic
}

func TestNotifyAll(t *testing.T) {
	h := NewHub()
	a, cancelA := h.Subscribe("k1")
	b, cancelB := h.Subscribe("k2")
	defer cancelA()
	defer cancelB()
	h.NotifyAll()
	if !pending(a) || !pending(b) {
		t.Fatal("NotifyAll missed a subscriber")
	}
}
