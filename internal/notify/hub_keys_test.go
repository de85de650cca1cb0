package notify

import "testing"

// One subscription to several keys: woken by any of them on one channel; a wake-up pending on
// it counts for every key, so the next one goes to another subscriber; leaving leaves every key.
func TestSubscribeSeveralKeys(t *testing.T) {
	h := NewHub()
	both, cancelBoth := h.Subscribe("a", "b")
	onlyB, cancelB := h.Subscribe("b")
	defer cancelB()
	h.Notify("b")
	if len(both) != 1 || len(onlyB) != 0 {
		t.Fatalf("Notify(b): both=%d onlyB=%d, want the first subscriber of b woken", len(both), len(onlyB))
	}
	h.Notify("a") // already woken: nothing more to say on its channel
	h.Notify("b") // both has a wake-up pending: onlyB is next
	if len(onlyB) != 1 {
		t.Fatal("Notify(b) with a wake-up pending for the subscriber of a and b did not pass to the next subscriber of b")
	}
	pending(both)
	pending(onlyB)
	h.Notify("a")
	if !pending(both) {
		t.Fatal("Notify(a) did not wake the subscriber of a and b")
	}
	cancelBoth()
	if _, ok := h.subs["a"]; ok {
		t.Fatal("key a still has a subscriber after it left")
	}
	if list := h.subs["b"]; len(list) != 1 || list[0].ch != onlyB {
		t.Fatalf("key b after the subscriber of a and b left: %v, want only the other", list)
	}
}

// NotifyID wakes the named subscriber even when it subscribed last, and no one else; an unknown
// name wakes nobody and says so.
func TestNotifyIDWakesTheFront(t *testing.T) {
	h := NewHub()
	first, c1 := h.SubscribeAs("a1", "k")
	defer c1()
	front, c2 := h.SubscribeAs("a2", "k")
	defer c2()
	if !h.NotifyID("k", "a2") {
		t.Fatal("NotifyID(k, a2) found no subscriber a2")
	}
	if len(front) != 1 || len(first) != 0 {
		t.Fatalf("NotifyID(k, a2): front=%d first=%d, want only the named subscriber woken", len(front), len(first))
	}
	if h.NotifyID("k", "gone") || len(first) != 0 {
		t.Fatal("NotifyID of a name with no subscriber woke someone or claimed to")
	}
}
