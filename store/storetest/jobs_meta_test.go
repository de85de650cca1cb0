package storetest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/storetest"
)

// memJobHarness makes reference stores; with advance, Advance moves the clock of the test's store.
func memJobHarness(advance bool) storetest.JobHarness {
	var mu sync.Mutex
	stores := map[*testing.T]*memJobStore{}
	h := storetest.JobHarness{NewJobStore: func(t *testing.T) store.JobStore {
		s := newMemJobStore()
		mu.Lock()
		stores[t] = s
		mu.Unlock()
		t.Cleanup(func() {
			mu.Lock()
			delete(stores, t)
			mu.Unlock()
		})
		return s
	}}
	if advance {
		h.Advance = func(t *testing.T, d time.Duration) {
			mu.Lock()
			s := stores[t]
			mu.Unlock()
			if s == nil {
				t.Fatal("Advance before NewJobStore")
			}
			s.advance(d)
		}
	}
	return h
}

// The suite passes on the reference store, with a clock the harness moves and with the real one.
func TestRunJobsOnReference(t *testing.T) {
	t.Parallel()
	storetest.RunJobs(t, memJobHarness(true))
}

func TestRunJobsOnReferenceRealClock(t *testing.T) {
	t.Parallel()
	storetest.RunJobs(t, memJobHarness(false))
}

// overlapGrant also hands out a job that is already running, as a claim that forgot the
// running attempt on the resource would.
type overlapGrant struct{ store.JobStore }

func (o overlapGrant) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	jobs, err := o.JobStore.ClaimJobs(ctx, p)
	if err != nil || len(jobs) >= p.Limit {
		return jobs, err
	}
	running, err := o.JobStore.ListJobs(ctx, &store.JobListParams{State: store.JobRunning, Kind: p.Kinds[0], Limit: 1})
	if err != nil {
		return nil, err
	}
	for _, r := range running {
		dup := false
		for _, j := range jobs {
			dup = dup || j.ID == r.ID
		}
		if !dup {
			jobs = append(jobs, r)
		}
	}
	return jobs, nil
}

// staleJobTokens reports the same fencing token for every attempt (passing the real ones on to
// the store), as a store that drew tokens outside the claim, or per process, might.
type staleJobTokens struct {
	store.JobStore
	mu   sync.Mutex
	real map[int64]uint64
}

func (s *staleJobTokens) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	jobs, err := s.JobStore.ClaimJobs(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		s.real[j.ID] = j.Token
		j.Token = 7
	}
	return jobs, err
}

func (s *staleJobTokens) token(id int64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.real[id]
}

func (s *staleJobTokens) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	q := *p
	q.Token = s.token(p.ID)
	return s.JobStore.CompleteJob(ctx, &q)
}

func (s *staleJobTokens) FailJob(ctx context.Context, p *store.FailParams) (*store.Job, error) {
	q := *p
	q.Token = s.token(p.ID)
	return s.JobStore.FailJob(ctx, &q)
}

// noIdempotency drops idempotency keys, as a store that checked them outside the transaction
// that inserts the job would, under enough concurrency.
type noIdempotency struct{ store.JobStore }

func (n noIdempotency) SubmitJob(ctx context.Context, p *store.SubmitParams) (*store.SubmitResult, error) {
	q := *p
	q.IdempotencyKey = ""
	return n.JobStore.SubmitJob(ctx, &q)
}

// The job checks must fail when the invariant is broken, or they prove nothing.
func TestJobChecksCatchBrokenStores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		s    func() store.JobStore
		want []string // the error names one of these
	}{
		// Claims that ignore the head rule start a job of a resource while its head runs, or
		// out of order once the head has ended.
		{"claim ignores the head rule", func() store.JobStore {
			s := newMemJobStore()
			s.ignoreHead = true
			return s
		}, []string{"exclusion broken", "order broken"}},
		// A second grant of a running job overlaps the first (or, if the first had just ended
		// in the test's bookkeeping, repeats an ended job or its token).
		{"claim grants a running job", func() store.JobStore { return overlapGrant{newMemJobStore()} },
			[]string{"exclusion broken", "order broken"}},
		{"promotion takes the newest job", func() store.JobStore {
			s := newMemJobStore()
			s.lifo = true
			return s
		}, []string{"order broken on"}},
		{"tokens do not increase", func() store.JobStore {
			return &staleJobTokens{JobStore: newMemJobStore(), real: map[int64]uint64{}}
		}, []string{"token order broken"}},
	} {
		// A broken store is caught when the claimers happen to meet its fault, which a run on a
		// busy machine may not: each gets a few runs on a fresh store, and must be caught in one.
		var err error
		ok := false
		for try := 0; try < 5 && !ok; try++ {
			_, err = storetest.CheckJobExclusion(ctx, c.s(), 8, 20, 10)
			for _, w := range c.want {
				ok = ok || err != nil && strings.Contains(err.Error(), w)
			}
		}
		if !ok {
			t.Errorf("CheckJobExclusion on a store whose %s, 5 runs: %v; want an error naming one of %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	if err := storetest.CheckJobIdempotency(ctx, noIdempotency{newMemJobStore()}, 32); err == nil {
		t.Error("CheckJobIdempotency on a store that ignores idempotency keys passed")
	}
	// And they pass on the reference store.
	if stats, err := storetest.CheckJobExclusion(ctx, newMemJobStore(), 8, 20, 10); err != nil {
		t.Errorf("CheckJobExclusion on the reference store: %v", err)
	} else if stats.Failed == 0 || stats.Completed+stats.Discarded != 200 {
		t.Errorf("CheckJobExclusion on the reference store: stats %+v", stats)
	}
	if err := storetest.CheckJobIdempotency(ctx, newMemJobStore(), 32); err != nil {
		t.Errorf("CheckJobIdempotency on the reference store: %v", err)
	}
}
