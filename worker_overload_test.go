package baton_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// overloadedClaims refuses the first claim as an overloaded server does (503 with Retry-After)
// and records when each claim was made.
type overloadedClaims struct {
	jobStore
	after   time.Duration
	refused chan struct{}
	mu      sync.Mutex
	claims  []time.Time
}

func (s *overloadedClaims) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	s.mu.Lock()
	s.claims = append(s.claims, time.Now())
	first := len(s.claims) == 1
	s.mu.Unlock()
	if first {
		close(s.refused)
		return nil, overloaded{after: s.after}
	}
	return s.jobStore.ClaimJobs(ctx, p)
}

// A claim refused with a Retry-After is not retried before that time, even when the store wakes
// the worker meanwhile (here: a job submitted right after the refusal) or its poll interval is
// shorter.
func TestWorkerClaimWaitsOutRetryAfter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := &overloadedClaims{jobStore: b.open(t), after: 500 * time.Millisecond, refused: make(chan struct{})}
		q := newQueue(t, st, baton.Kind{Name: "k"})
		ch, onEnd := endedChan(2)
		w, err := q.NewWorker(baton.WorkerConfig{
			PollInterval: 10 * time.Millisecond,
			Handlers:     map[string]baton.Handler{"k": func(context.Context, *baton.Job) error { return nil }},
			OnJobEnd:     onEnd,
			Logger:       quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		go func() { _ = w.Run(ctx) }()
		<-st.refused
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
		waitEnded(t, ch)
		st.mu.Lock()
		defer st.mu.Unlock()
		if gap := st.claims[1].Sub(st.claims[0]); gap < st.after {
			t.Fatalf("claim retried %s after a refusal that asked for %s", gap, st.after)
		}
	})
}
