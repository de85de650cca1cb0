package baton_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// shedReleases refuses its first `sheds` releases as an overloaded server does (a 503 with
// Retry-After: after), and records when each release was asked.
type shedReleases struct {
	store.Store
	sheds int
	after time.Duration
	mu    sync.Mutex
	asked []time.Time
}

func (s *shedReleases) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	s.mu.Lock()
	s.asked = append(s.asked, time.Now())
	shed := len(s.asked) <= s.sheds
	s.mu.Unlock()
	if shed {
		return nil, overloaded{after: s.after}
	}
	return s.Store.Release(ctx, p)
}

// A release refused by an overloaded server is sent again after its Retry-After, while the
// lease's local deadline allows, as the TypeScript and Python clients do; one that could only
// be retried after the deadline fails at once, and the lease counts as of unknown outcome.
func TestReleaseWaitsOutRetryAfter(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := testCtx(t)
	for _, c := range []struct {
		name        string
		after, ttl  time.Duration
		wantRetried bool
	}{
		{"retried before the deadline", 300 * time.Millisecond, 10 * time.Second, true},
		{"not after the deadline", 20 * time.Second, 10 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			shed := &shedReleases{Store: st, sheds: 1, after: c.after}
			locker, err := baton.NewLocker(shed, nil)
			if err != nil {
				t.Fatal(err)
			}
			l, err := locker.TryAcquire(ctx, "shed/"+c.name, baton.WithTTL(c.ttl))
			if err != nil {
				t.Fatal(err)
			}
			err = l.Release(ctx)
			shed.mu.Lock()
			asked := shed.asked
			shed.mu.Unlock()
			if !c.wantRetried {
				var hint interface{ RetryAfterHint() time.Duration }
				if len(asked) != 1 || !errors.As(err, &hint) {
					t.Fatalf("release: %v after %d requests; want the overloaded error, one request", err, len(asked))
				}
				return
			}
			if err != nil || len(asked) != 2 {
				t.Fatalf("release: %v after %d requests; want nil after 2", err, len(asked))
			}
			if gap := asked[1].Sub(asked[0]); gap < c.after {
				t.Fatalf("release sent again %s after a refusal that asked for %s", gap, c.after)
			}
			if _, err := st.Get(ctx, "shed/"+c.name); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the key is still held after the release: %v", err)
			}
		})
	}
}
