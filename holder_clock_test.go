package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The clock's timings in these tests: a 3 s TTL, valid for 2.7 s after the start of each
// successful request, renewed every second, stop-grace 1 s.
const (
	testTTL      = 3 * time.Second
	testValidity = 2700 * time.Millisecond
	testInterval = time.Second
	testGrace    = time.Second
)

var errUnreachable = errors.New("renew: connection refused")

// startTestClock starts a clock on fake time whose n-th renew (from 1) returns renew(n).
func startTestClock(t *testing.T, ft *fakeTime, grace time.Duration, renew func(n int) error) (*holderClock, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	c := &holderClock{}
	c.start(context.Background(), clockConfig{
		ttl: testTTL, validity: testValidity, grace: grace,
		keepalive: true, interval: testInterval, timeout: testInterval,
		renew: func(context.Context) error { return renew(int(calls.Add(1))) },
		gone:  leaseGone, words: &leaseWords, log: slog.New(slog.DiscardHandler), time: ft,
	}, ft.Now())
	t.Cleanup(func() { c.end(nil) })
	return c, &calls
}

// alive fails the test unless ctx has not ended.
func alive(t *testing.T, what string, ctx context.Context) {
	t.Helper()
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("%s ended: %v", what, err)
	}
}

// ended fails the test unless ctx ended with a cause that wraps ErrLeaseLost and says want.
func ended(t *testing.T, what string, ctx context.Context, want string) {
	t.Helper()
	cause := context.Cause(ctx)
	if !errors.Is(cause, ErrLeaseLost) || !strings.Contains(fmt.Sprint(cause), want) {
		t.Fatalf("%s: cause %v, want ErrLeaseLost saying %q", what, cause, want)
	}
}

// While renews fail, the stop context ends stop-grace before the local deadline and the lease's
// context at it; the renews go on meanwhile, quickly.
func TestHolderClockStopsGraceBeforeTheDeadline(t *testing.T) {
	ft := newFakeTime()
	c, calls := startTestClock(t, ft, testGrace, func(int) error { return errUnreachable })
	ft.advance(testValidity - testGrace - time.Millisecond)
	alive(t, "the stop context just before stop-grace", c.stopCtx)
	ft.advance(time.Millisecond)
	ended(t, "the stop context at stop-grace", c.stopCtx, "stopping 1s before the holder's local deadline")
	alive(t, "the lease's context at stop-grace", c.ctx)
	ft.advance(testGrace - time.Millisecond)
	alive(t, "the lease's context just before the deadline", c.ctx)
	ft.advance(time.Millisecond)
	ended(t, "the lease's context at the deadline", c.ctx, "no renew succeeded before the holder's local deadline")
	if errors.Is(c.err(), ErrNotHeld) {
		t.Fatalf("a local deadline reported as the store's refusal: %v", c.err())
	}
	// The first renew at 1 s, then retries a tenth of the TTL apart (±20%) until 2.7 s.
	if n := calls.Load(); n < 5 {
		t.Fatalf("%d renews before the deadline, want quick retries after the first failure", n)
	}
}

// Each successful renew moves the local deadline, and the stop-grace with it, to validity after
// the renew's start.
func TestHolderClockRenewMovesTheDeadlines(t *testing.T) {
	ft := newFakeTime()
	start := ft.Now()
	c, _ := startTestClock(t, ft, testGrace, func(n int) error {
		if n <= 3 {
			return nil
		}
		return errUnreachable
	})
	ft.advance(3 * testInterval) // three renews succeed, at 1, 2 and 3 s
	if got, want := c.deadline(), start.Add(3*testInterval+testValidity); !got.Equal(want) {
		t.Fatalf("deadline %s after the start, want %s", got.Sub(start), want.Sub(start))
	}
	ft.advance(testValidity - testGrace - time.Millisecond)
	alive(t, "the stop context before the moved stop-grace", c.stopCtx)
	ft.advance(time.Millisecond)
	ended(t, "the stop context at the moved stop-grace", c.stopCtx, "stopping")
	alive(t, "the lease's context at the moved stop-grace", c.ctx)
	ft.advance(testGrace)
	ended(t, "the lease's context at the moved deadline", c.ctx, "no renew succeeded")
}

// A renew the store refuses because the lease is gone ends both contexts at once, and keepalive
// with them.
func TestHolderClockGoneEndsAtOnce(t *testing.T) {
	ft := newFakeTime()
	c, calls := startTestClock(t, ft, testGrace, func(int) error { return fmt.Errorf("renew: %w", ErrNotHeld) })
	ft.advance(testInterval)
	ended(t, "the lease's context after the refusal", c.ctx, "not held")
	if !errors.Is(c.err(), ErrNotHeld) {
		t.Fatalf("cause %v, want it to wrap ErrNotHeld", c.err())
	}
	ended(t, "the stop context after the refusal", c.stopCtx, "not held")
	ft.advance(10 * testInterval)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d renews, want none after the store's refusal", n)
	}
}

// A renew that says the work ended by itself (a reported job) ends keepalive and nothing else.
func TestHolderClockKeepaliveEndsQuietly(t *testing.T) {
	ft := newFakeTime()
	c, calls := startTestClock(t, ft, 0, func(int) error { return errKeepaliveEnded })
	ft.advance(testValidity - time.Millisecond)
	alive(t, "the lease's context", c.ctx)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d renews, want keepalive to end after the first", n)
	}
}

// A renew that the store accepted after the local deadline passed, while it was in flight, does
// not revive the lease: the work under it was told to stop.
func TestHolderClockLateRenewDoesNotRevive(t *testing.T) {
	ft := newFakeTime()
	start := ft.Now()
	c, _ := startTestClock(t, ft, 0, func(int) error {
		ft.advance(2 * testInterval) // the request takes until past the deadline
		return nil
	})
	ft.advance(testInterval)
	ended(t, "the lease's context", c.ctx, "no renew succeeded")
	if got, want := c.deadline(), start.Add(testValidity); !got.Equal(want) {
		t.Fatalf("deadline moved to %s after the start by a renew that succeeded after it; want %s", got.Sub(start), want.Sub(start))
	}
}
