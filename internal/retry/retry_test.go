package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

type answer struct {
	retryable bool
	after     time.Duration
}

func (a answer) Error() string                 { return "baton server: 503" }
func (a answer) Retryable() bool               { return a.retryable }
func (a answer) RetryAfterHint() time.Duration { return a.after }

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp: connection refused"), true},
		{context.DeadlineExceeded, true},
		{answer{retryable: true}, true},
		{fmt.Errorf("renew: %w", answer{retryable: false}), false},
		{fmt.Errorf("renew: %w", store.ErrNotHeld), false},
		{store.ErrNotFound, false},
		{&store.InvalidArgumentError{Field: "ttl"}, false},
		{store.ErrClosed, false},
		{store.ErrJobState, false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}

// The waits stay within their documented bounds, whatever the jitter draws.
func TestWaitBounds(t *testing.T) {
	within := func(name string, got, lo, hi time.Duration) {
		t.Helper()
		if got < lo || got > hi {
			t.Fatalf("%s = %s, want in [%s, %s]", name, got, lo, hi)
		}
	}
	for range 1000 {
		within("Jitter(1s)", Jitter(time.Second), 800*time.Millisecond, 1200*time.Millisecond)
		within("Held(15s)", Held(15*time.Second), 800*time.Millisecond, 1200*time.Millisecond)
		within("Held(1s)", Held(time.Second), 80*time.Millisecond, 120*time.Millisecond)
		within("Held(100ms)", Held(100*time.Millisecond), 40*time.Millisecond, 60*time.Millisecond)
		within("Backoff(1s, 1)", Backoff(time.Second, 1), 80*time.Millisecond, 120*time.Millisecond)
		within("Backoff(1s, 3)", Backoff(time.Second, 3), 320*time.Millisecond, 480*time.Millisecond)
		within("Backoff(1s, 60)", Backoff(time.Second, 60), 800*time.Millisecond, 1200*time.Millisecond)
		// Never sooner than the server asked.
		within("After(503 in 2s)", After(fmt.Errorf("claim: %w", answer{after: 2 * time.Second})), 2*time.Second, 2500*time.Millisecond)
	}
	if d := After(errors.New("connection refused")); d != 0 {
		t.Fatalf("After of an error without a hint = %s, want 0", d)
	}
	if d := After(answer{retryable: true}); d != 0 {
		t.Fatalf("After of a zero hint = %s, want 0", d)
	}
	if d := Jitter(0); d != 0 {
		t.Fatalf("Jitter(0) = %s", d)
	}
}
