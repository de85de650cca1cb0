package store

import "sync/atomic"

// Closed is a backend's closed flag: set it (Store(true)) in Close, and start every call with
// Check. A backend whose client fails its calls once closed passes their errors through Wrap.
type Closed struct{ atomic.Bool }

// Check returns ErrClosed once the store is closed.
func (c *Closed) Check() error {
	if c.Load() {
		return ErrClosed
	}
	return nil
}

// Wrap returns err, or ErrClosed in its place if the store was closed meanwhile (the call
// failed because of the Close).
func (c *Closed) Wrap(err error) error {
	if err != nil && c.Load() {
		return ErrClosed
	}
	return err
}

// Subscribe is a store's Subscribe (or SubscribeJobs): subscribe(keys...), or once the store is
// closed a wake-up that has fired already, so that a waiter retries at once and sees ErrClosed
// instead of waiting for its poll.
func (c *Closed) Subscribe(subscribe func(keys ...string) (<-chan struct{}, func()), keys ...string) (<-chan struct{}, func()) {
	if c.Load() {
		ch := make(chan struct{}, 1)
		ch <- struct{}{}
		return ch, func() {}
	}
	return subscribe(keys...)
}
