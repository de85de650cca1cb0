package baton

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// unreachableRenews grants every acquire and fails every renew, as a store cut off after the
// grant does.
type unreachableRenews struct{ store.Store }

func (unreachableRenews) Acquire(_ context.Context, p *store.AcquireParams) (*store.Lease, error) {
	return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Token: 1, ExpiresAt: time.Now().Add(p.TTL)}, nil
}

func (unreachableRenews) Renew(context.Context, *store.RenewParams) (*store.Lease, error) {
	return nil, errUnreachable
}

func (unreachableRenews) Release(context.Context, *store.ReleaseParams) (*store.ReleaseResult, error) {
	return &store.ReleaseResult{}, nil
}

// A lease taken WithStopGrace ends its StopContext that long before its local deadline when renews
// fail; without it, StopContext ends with Context.
func TestLeaseStopGrace(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []Option
		grace time.Duration
	}{
		{"with a stop-grace", []Option{WithTTL(3 * time.Second), WithStopGrace(time.Second)}, time.Second},
		{"without", []Option{WithTTL(3 * time.Second)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft := newFakeTime()
			locker, err := NewLocker(unreachableRenews{}, &Config{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			locker.clockTime = ft
			lease, err := locker.TryAcquire(context.Background(), "k", c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release(context.Background())
			// The deadline counts from the acquire's start, on the real clock: time the test
			// from it.
			deadline := lease.Deadline()
			ft.advance(deadline.Add(-c.grace - time.Millisecond).Sub(ft.Now()))
			alive(t, "StopContext before the stop-grace", lease.StopContext())
			ft.advance(time.Millisecond)
			if c.grace > 0 {
				ended(t, "StopContext at the stop-grace", lease.StopContext(), "stopping 1s before")
				alive(t, "Context at the stop-grace", lease.Context())
				ft.advance(c.grace - time.Millisecond)
				alive(t, "Context before the deadline", lease.Context())
				ft.advance(time.Millisecond)
			}
			ended(t, "Context at the deadline", lease.Context(), "no renew succeeded")
			ended(t, "StopContext at the deadline", lease.StopContext(), "")
		})
	}
}

// A stop-grace is at most a third of the TTL, so that keepalive has time to renew before it.
func TestLeaseStopGraceBounds(t *testing.T) {
	locker, err := NewLocker(unreachableRenews{}, &Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, grace := range []time.Duration{-time.Millisecond, time.Second + time.Millisecond} {
		_, err := locker.TryAcquire(context.Background(), "k", WithTTL(3*time.Second), WithStopGrace(grace))
		var inv *InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != "stop_grace" {
			t.Fatalf("WithStopGrace(%s) with a 3s TTL: %v, want an invalid stop_grace", grace, err)
		}
	}
}
