package baton_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/sqlite"
)

// A worker starts jobs on wake-ups, not on its poll: with a poll interval of an hour, a job
// submitted to the idle worker starts, a job submitted while its only slot is busy starts once
// that slot frees (the submit's wake-up came while the worker could not claim), and a job
// submitted once both have ended starts too. The idle worker's submits come only after its claim
// loop found nothing to claim and has no claim in flight (the store's claims are watched): from
// then on only a wake-up, or the hour's poll, makes it claim again, so a claim loop that ignores
// wake-ups cannot start those jobs by a claim that happened to come after the submit (a slot
// freed by the last report, or the first claim).
func TestWorkerStartsJobsWithoutPolling(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st, claims := watchClaims(t, b.open(t))
		q := newQueue(t, st, baton.Kind{Name: "k"})
		started := make(chan string, 3)
		release := make(chan struct{})
		endedCh, onEnd := endedChan(3)
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency:  1,
			PollInterval: time.Hour,
			Logger:       quietLogger(),
			OnJobEnd:     onEnd,
			Handlers: map[string]baton.Handler{"k": func(_ context.Context, j *baton.Job) error {
				started <- j.Resource
				if j.Resource == "busy" {
					<-release
				}
				return nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)

		claims.waitIdle(t)
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "busy"})
		if r := recv(t, started); r != "busy" {
			t.Fatalf("started %s first", r)
		}
		// The only slot is taken: this submit's wake-up finds the worker unable to claim.
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "queued"})
		close(release)
		if r := recv(t, started); r != "queued" {
			t.Fatalf("started %s after the slot freed", r)
		}
		for range 2 {
			if e := waitEnded(t, endedCh); e.outcome != baton.JobSucceeded {
				t.Fatalf("job %d ended %q", e.job.ID, e.outcome)
			}
		}
		// Both jobs have ended: once the claim loop has claimed for the slot the last report
		// freed (if it had not already found nothing), it waits for news.
		claims.waitIdle(t)
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "idle"})
		if r := recv(t, started); r != "idle" {
			t.Fatalf("started %s on the idle worker", r)
		}
	})
}

// claimWatch follows a worker's claims on its store (ClaimJobs: the claim loop's; claims sent with
// a batch of completions are not counted), so that a test can wait until the claim loop has found
// nothing to claim and has no claim in flight.
type claimWatch struct {
	mu        sync.Mutex
	inFlight  int
	lastEmpty bool          // the last claim to answer claimed nothing
	changed   chan struct{} // closed (and replaced) at each change
}

// watchClaims wraps st so that its claims are followed. Every other method, and every optional
// interface the worker looks for (completions in batches, completions that claim), is the
// store's own: the wrapper embeds the store's own type.
func watchClaims(t *testing.T, st jobStore) (jobStore, *claimWatch) {
	t.Helper()
	c := &claimWatch{changed: make(chan struct{})}
	switch s := st.(type) {
	case *sqlite.Store:
		return &claimWatchedSQLite{s, c}, c
	case *postgres.Store:
		return &claimWatchedPostgres{s, c}, c
	}
	t.Fatalf("cannot watch the claims of a %T", st)
	return nil, nil
}

// The wrappers keep the worker's paths: batched completions on both, and on PostgreSQL
// completions that claim in the same round trip.
var (
	_ store.ManyCompleter   = (*claimWatchedSQLite)(nil)
	_ store.CompleteClaimer = (*claimWatchedPostgres)(nil)
)

type claimWatchedSQLite struct {
	*sqlite.Store
	w *claimWatch
}

func (s *claimWatchedSQLite) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	return s.w.claim(ctx, p, s.Store.ClaimJobs)
}

type claimWatchedPostgres struct {
	*postgres.Store
	w *claimWatch
}

func (s *claimWatchedPostgres) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	return s.w.claim(ctx, p, s.Store.ClaimJobs)
}

func (c *claimWatch) claim(ctx context.Context, p *store.ClaimParams, claim func(context.Context, *store.ClaimParams) ([]*store.Job, error)) ([]*store.Job, error) {
	c.update(func() { c.inFlight++ })
	jobs, err := claim(ctx, p)
	c.update(func() {
		c.inFlight--
		c.lastEmpty = err == nil && len(jobs) == 0
	})
	return jobs, err
}

func (c *claimWatch) update(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitIdle waits, within the test's context, until no claim is in flight and the last one
// claimed nothing. A claim loop then waits for news: a wake-up, or its poll.
func (c *claimWatch) waitIdle(t *testing.T) {
	t.Helper()
	ctx := testCtx(t)
	for {
		c.mu.Lock()
		idle, changed := c.inFlight == 0 && c.lastEmpty, c.changed
		c.mu.Unlock()
		if idle {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("timed out waiting for the worker's claims to find nothing")
		}
	}
}
