package notify

import (
	"context"
	"time"
)

// Waiter is the wait of a subscriber between two attempts (to acquire a key, to claim jobs):
// until a wake-up from its subscription, its fallback poll, or the end of its context, whichever
// comes first. Make it with the subscription taken before the first attempt, so that whatever
// became free between an attempt and the wait still wakes it. Locker.Acquire, the worker's claim
// loop and the server's claim long-poll all wait with it.
type Waiter struct {
	wake        <-chan struct{}
	unsubscribe func()
	// Go 1.23+ timers: Reset discards a value not yet received, so the timer is reused without
	// draining (the old drain idiom could block forever).
	timer *time.Timer
}

// Event says what ended a wait.
type Event int

// Events that end a wait.
const (
	Cancelled Event = iota // the context ended
	Woken                  // a wake-up from the subscription
	Polled                 // the wait's duration passed
	Signalled              // the channel given to WaitFor
)

// NewWaiter returns a Waiter on a subscription (a store's Subscribe or SubscribeJobs); Close
// cancels it.
func NewWaiter(wake <-chan struct{}, unsubscribe func()) *Waiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Waiter{wake: wake, unsubscribe: unsubscribe, timer: t}
}

// Close ends the subscription.
func (w *Waiter) Close() {
	w.timer.Stop()
	w.unsubscribe()
}

// Wait waits up to poll for a wake-up.
func (w *Waiter) Wait(ctx context.Context, poll time.Duration) Event {
	return w.wait(ctx, poll, w.wake, nil)
}

// WaitFor waits up to d for a receive on ch (nil: d alone), and leaves wake-ups unread: while
// the subscriber cannot act on them (its slots are full, the store failed or asked it to stay
// away), a store that wakes one subscriber per event (the Hub) passes the next to another.
func (w *Waiter) WaitFor(ctx context.Context, d time.Duration, ch <-chan struct{}) Event {
	return w.wait(ctx, d, nil, ch)
}

func (w *Waiter) wait(ctx context.Context, d time.Duration, wake, ch <-chan struct{}) Event {
	w.timer.Reset(max(d, time.Millisecond))
	defer w.timer.Stop()
	select {
	case <-ctx.Done():
		return Cancelled
	case <-wake:
		return Woken
	case <-ch:
		return Signalled
	case <-w.timer.C:
		return Polled
	}
}
