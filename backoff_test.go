package baton_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

func TestExponentialBackoff(t *testing.T) {
	b, err := baton.ExponentialBackoff(time.Minute, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for attempt, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute,
		4: 5 * time.Minute, 1000: 5 * time.Minute} {
		for range 50 {
			if d := b(attempt); d < want/2 || d > want {
				t.Fatalf("attempt %d: %s, want in [%s, %s]", attempt, d, want/2, want)
			}
		}
	}
	// A cap near the largest duration does not overflow.
	huge, _ := baton.ExponentialBackoff(time.Hour, 1<<62)
	if d := huge(100); d < 1<<61 {
		t.Fatalf("huge cap, attempt 100: %s", d)
	}
	for _, c := range []struct {
		base, max time.Duration
		field     string
	}{{0, time.Second, "backoff_base"}, {-time.Second, time.Second, "backoff_base"}, {time.Second, 0, "backoff_max"},
		{2 * time.Second, time.Second, "backoff_base"}} {
		if _, err := baton.ExponentialBackoff(c.base, c.max); !isInvalid(err, c.field) {
			t.Errorf("ExponentialBackoff(%s, %s): %v, want an error on %s", c.base, c.max, err, c.field)
		}
	}
}

func TestWorkerHeartbeatIntervalBounds(t *testing.T) {
	q := newQueue(t, openSQLite(t), baton.Kind{Name: "k"})
	h := map[string]baton.Handler{"k": func(ctx context.Context, j *baton.Job) error { return nil }}
	for _, hb := range []time.Duration{-time.Second, 10*time.Second + 1} {
		if _, err := q.NewWorker(baton.WorkerConfig{Handlers: h, LeaseTTL: 30 * time.Second, HeartbeatInterval: hb}); !isInvalid(err, "heartbeat_interval") {
			t.Errorf("HeartbeatInterval %s: %v", hb, err)
		}
	}
	if _, err := q.NewWorker(baton.WorkerConfig{Handlers: h, LeaseTTL: 30 * time.Second, HeartbeatInterval: 10 * time.Second}); err != nil {
		t.Errorf("HeartbeatInterval of a third of the TTL: %v", err)
	}
}
