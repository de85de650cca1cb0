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
