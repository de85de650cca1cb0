package baton_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidation(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cases := []struct {
		cfg   baton.Config
		field string
	}{
		{baton.Config{TTL: 500 * time.Millisecond}, "ttl"},
		{baton.Config{DriftFactor: 0.5}, "drift_factor"},
		{baton.Config{DriftFactor: -0.1}, "drift_factor"},
		{baton.Config{SafetyMargin: time.Second}, "safety_margin"},
		{baton.Config{PollInterval: time.Millisecond}, "poll_interval"},
		{baton.Config{}, ""},
	}
	for _, c := range cases {
		_, err := baton.NewLocker(st, &c.cfg)
		var inv *baton.InvalidArgumentError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.cfg, err)
		case c.field != "" && (!errors.As(err, &inv) || inv.Field != c.field):
			t.Errorf("%+v: %v, want invalid %s", c.cfg, err, c.field)
		}
	}
}

// The holder's view of validity ends before the store's: TTL*(1-drift) - margin after the start
// of the acquire request.
func TestLocalDeadlineBeforeStoreExpiry(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	locker, err := baton.NewLocker(st, &baton.Config{DriftFactor: 0.1, SafetyMargin: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lease, err := locker.TryAcquire(context.Background(), "k", baton.WithTTL(time.Second), baton.WithKeepalive(false))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	elapsed := time.Since(start)
	// 1s * 0.9 - 200ms = 700ms.
	if elapsed < 700*time.Millisecond || elapsed >= time.Second {
		t.Fatalf("lease context ended after %s, want in [700ms, 1s)", elapsed)
	}
	if !errors.Is(lease.Err(), baton.ErrLeaseLost) {
		t.Fatalf("Err = %v", lease.Err())
	}
	// The store still holds it until its TTL: the holder stopped first.
	if _, err := locker.Get(context.Background(), "k"); err != nil && elapsed < 950*time.Millisecond {
		t.Fatalf("store released the lease before its TTL: %v", err)
	}
	if err := lease.Renew(context.Background()); !errors.Is(err, baton.ErrLeaseLost) {
		t.Fatalf("Renew of a lost lease: %v, want ErrLeaseLost", err)
	}
}
