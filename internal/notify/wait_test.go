package notify

import (
	"context"
	"testing"
	"time"
)

// Each way a wait ends, and WaitFor leaves wake-ups for the next subscriber.
func TestWaiter(t *testing.T) {
	h := NewHub()
	w := NewWaiter(h.Subscribe("k"))
	other, cancelOther := h.Subscribe("k")
	defer cancelOther()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h.Notify("k")
	if ev := w.Wait(ctx, time.Hour); ev != Woken {
		t.Fatalf("Wait with a wake-up pending: %v, want Woken", ev)
	}
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	if ev := w.WaitFor(ctx, time.Hour, ch); ev != Signalled {
		t.Fatalf("WaitFor with its channel ready: %v, want Signalled", ev)
	}
	h.Notify("k")
	if ev := w.WaitFor(ctx, time.Millisecond, nil); ev != Polled {
		t.Fatalf("WaitFor with a wake-up pending and nothing else: %v, want Polled", ev)
	}
	if len(w.wake) != 1 {
		t.Fatal("WaitFor took the wake-up")
	}
	h.Notify("k") // the waiter's wake-up is still pending: the other subscriber is next
	if !pending(other) {
		t.Fatal("a wake-up left unread by WaitFor did not send the next one to another subscriber")
	}
	pending(w.wake)
	if ev := w.Wait(ctx, time.Millisecond); ev != Polled {
		t.Fatalf("Wait with nothing pending: %v, want Polled", ev)
	}
	cancel()
	if ev := w.Wait(ctx, time.Hour); ev != Cancelled {
		t.Fatalf("Wait after ctx ended: %v, want Cancelled", ev)
	}
	w.Close()
	if _, ok := h.subs["k"]; !ok || len(h.subs["k"]) != 1 {
		t.Fatalf("after Close: %v, want only the other subscriber", h.subs["k"])
	}
}
