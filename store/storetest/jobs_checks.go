package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/store"
)

// JobExclusionStats counts what CheckJobExclusion saw.
type JobExclusionStats struct {
	// Claims counts attempts started; EmptyClaims the ClaimJobs calls that returned nothing.
	Claims, EmptyClaims int64
	// Completed, Failed (retryable or discarded) and Discarded count attempt ends.
	Completed, Failed, Discarded int64
	// MultiClaims counts ClaimJobs calls that returned more than one job.
	MultiClaims int64
}

// The kind CheckJobExclusion registers: a few attempts, so that random failures both retry and
// discard.
const exclusionKind = "storetest.exclusion"

// CheckJobExclusion submits jobsPerResource jobs on each of resources resources, then has
// goroutines workers claim (several jobs per claim), complete or randomly fail (RetryAfter 0)
// until every job is final. From its own bookkeeping, not the store's word, it returns an error
// at the first:
//   - claim on a resource while another claim on it had not been ended (a claim that returned
//     before the previous attempt's complete or fail was even sent);
//   - claim of a job that is not the oldest job of its resource the test has not seen end
//     (per-resource FIFO, which holds through retries);
//   - fencing token not greater than the previous claim's on that resource, in bookkeeping
//     order and in real-time order;
//
// and at the end, unless every job is final (succeeded or discarded, as the test saw it) and
// finished in submission order per resource. The store must be empty of the kind
// "storetest.exclusion"; the check registers it.
func CheckJobExclusion(ctx context.Context, s store.JobStore, goroutines, resources, jobsPerResource int) (JobExclusionStats, error) {
	var stats JobExclusionStats
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: exclusionKind, MaxAttempts: 3}}); err != nil {
		return stats, err
	}
	type resState struct {
		mu        sync.Mutex
		key       string
		submitted []int64 // in submission order
		next      int     // index in submitted of the oldest job not seen final
		running   int64   // the job the test believes is running, 0 if none
		endStart  time.Time
		lastToken uint64
		grants    []grant
	}
	byKey := make(map[string]*resState, resources)
	states := make([]*resState, resources)
	for r := range states {
		states[r] = &resState{key: fmt.Sprintf("exclusion/%d", r)}
		byKey[states[r].key] = states[r]
	}
	// Interleaved, so that IDs and seqs of one resource are not contiguous.
	finalState := make(map[int64]store.JobState)
	for i := range jobsPerResource {
		for _, st := range states {
			res, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: exclusionKind, Resource: st.key,
				Args: mustJSON(map[string]int{"n": i})})
			if err != nil {
				return stats, fmt.Errorf("submit on %s: %w", st.key, err)
			}
			st.submitted = append(st.submitted, res.Job.ID)
		}
	}
	total := int64(resources * jobsPerResource)

	var finals atomic.Int64
	var failed atomic.Bool
	var firstErr error
	var errOnce sync.Once
	var finalMu sync.Mutex
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		failed.Store(true)
	}
	// recordClaim checks one claimed job against the bookkeeping.
	recordClaim := func(j *store.Job, start, returned time.Time) {
		st := byKey[j.Resource]
		if st == nil {
			fail(fmt.Errorf("claim returned job %d on resource %q, which the check never used", j.ID, j.Resource))
			return
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		switch {
		case st.running != 0:
			fail(fmt.Errorf("exclusion broken on %s: job %d (token %d) claimed while job %d was still running",
				st.key, j.ID, j.Token, st.running))
		case returned.Before(st.endStart):
			fail(fmt.Errorf("exclusion broken on %s: job %d (token %d) claimed before the previous attempt was ended",
				st.key, j.ID, j.Token))
		case st.next >= len(st.submitted):
			fail(fmt.Errorf("order broken on %s: job %d claimed after every job of the resource had ended", st.key, j.ID))
		case j.ID != st.submitted[st.next]:
			fail(fmt.Errorf("order broken on %s: job %d claimed while job %d, submitted before it, had not ended",
				st.key, j.ID, st.submitted[st.next]))
		case j.Token <= st.lastToken:
			fail(fmt.Errorf("token order broken on %s: job %d claimed with token %d after token %d",
				st.key, j.ID, j.Token, st.lastToken))
		case j.State != store.JobRunning || j.Attempt < 1 || j.Attempt > j.MaxAttempts:
			fail(fmt.Errorf("claim returned %s; want a running attempt", show(j)))
		}
		st.running = j.ID
		st.lastToken = max(st.lastToken, j.Token)
		st.grants = append(st.grants, grant{start: start, end: returned, token: j.Token})
	}
	// end completes or fails one claimed job, holding the resource's bookkeeping while the
	// store decides, so that the next claim on the resource is checked after the test knows how
	// this attempt ended.
	end := func(j *store.Job, rng *rand.Rand) {
		st := byKey[j.Resource]
		if st == nil {
			return
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		st.endStart = time.Now()
		if st.running == j.ID {
			st.running = 0
		}
		var got *store.Job
		var err error
		failing := rng.IntN(4) == 0
		if failing {
			got, err = s.FailJob(ctx, &store.FailParams{ID: j.ID, Token: j.Token, Message: "random failure"})
		} else {
			got, err = s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token})
		}
		if err != nil {
			fail(fmt.Errorf("end of job %d (token %d) on %s: %w", j.ID, j.Token, st.key, err))
			return
		}
		switch {
		case !failing && got.State == store.JobSucceeded:
			atomic.AddInt64(&stats.Completed, 1)
		case failing && got.State == store.JobRetryable && got.Attempt < got.MaxAttempts && got.Head:
			atomic.AddInt64(&stats.Failed, 1)
			return
		case failing && got.State == store.JobDiscarded && got.Attempt == got.MaxAttempts:
			atomic.AddInt64(&stats.Failed, 1)
			atomic.AddInt64(&stats.Discarded, 1)
		default:
			fail(fmt.Errorf("after %s (failing %v): %s", "the end of an attempt", failing, show(got)))
			return
		}
		finalMu.Lock()
		finalState[j.ID] = got.State
		finalMu.Unlock()
		st.next++
		finals.Add(1)
	}

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			worker := fmt.Sprintf("exclusion-worker-%d", g)
			wake, cancel := s.SubscribeJobs(exclusionKind)
			defer cancel()
			for !failed.Load() && finals.Load() < total {
				if err := ctx.Err(); err != nil {
					fail(fmt.Errorf("%d of %d jobs final when the context ended: %w", finals.Load(), total, err))
					return
				}
				start := time.Now()
				jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: worker, Kinds: []string{exclusionKind}, Limit: 3, TTL: time.Minute})
				returned := time.Now()
				if err != nil {
					fail(fmt.Errorf("claim: %w", err))
					return
				}
				if len(jobs) == 0 {
					atomic.AddInt64(&stats.EmptyClaims, 1)
					// Nothing claimable: poll again soon; a wake-up only shortens the wait.
					select {
					case <-wake:
					case <-time.After(2 * time.Millisecond):
					case <-ctx.Done():
					}
					continue
				}
				atomic.AddInt64(&stats.Claims, int64(len(jobs)))
				if len(jobs) > 1 {
					atomic.AddInt64(&stats.MultiClaims, 1)
				}
				for _, j := range jobs {
					recordClaim(j, start, returned)
				}
				runtime.Gosched() // let others claim while these run
				for _, j := range jobs {
					end(j, rng)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return stats, firstErr
	}
	// Every job is final, as the test saw it, and the store agrees.
	jobs, err := listAllJobs(ctx, s, store.JobListParams{Kind: exclusionKind, Limit: store.MaxListLimit})
	if err != nil {
		return stats, err
	}
	if int64(len(jobs)) != total {
		return stats, fmt.Errorf("%d jobs of the kind listed, %d submitted", len(jobs), total)
	}
	byID := make(map[int64]*store.Job, len(jobs))
	for _, j := range jobs {
		byID[j.ID] = j
		if want := finalState[j.ID]; j.State != want || j.Head {
			return stats, fmt.Errorf("at the end %s; the test saw it end %s", show(j), want)
		}
	}
	for _, st := range states {
		if st.next != len(st.submitted) {
			return stats, fmt.Errorf("%s: %d of %d jobs ended", st.key, st.next, len(st.submitted))
		}
		// Finished in submission order, on the store's clock too.
		for i := 1; i < len(st.submitted); i++ {
			prev, cur := byID[st.submitted[i-1]], byID[st.submitted[i]]
			if cur.FinishedAt.Before(prev.FinishedAt) || cur.Seq <= prev.Seq {
				return stats, fmt.Errorf("%s: job %d (seq %d) finished at %s, before job %d (seq %d) submitted before it, at %s",
					st.key, cur.ID, cur.Seq, cur.FinishedAt, prev.ID, prev.Seq, prev.FinishedAt)
			}
		}
		if err := checkRealTimeOrder(st.grants); err != nil {
			return stats, fmt.Errorf("token order broken on %s: %w", st.key, err)
		}
		if r, err := s.GetResource(ctx, st.key); err != nil || r.RunningJob != 0 || r.Unfinished != 0 {
			return stats, fmt.Errorf("resource %s at the end = %+v, %v; want no running or unfinished job", st.key, r, err)
		}
	}
	return stats, nil
}

// The kind CheckJobIdempotency registers.
const idempotencyKind = "storetest.idempotency"

// CheckJobIdempotency has goroutines submit at once with one idempotency key, each on a
// resource of its own, and returns an error unless exactly one job was created, every submit
// returned it, and all but one said Existing. The check registers the kind
// "storetest.idempotency"; the store must hold no job with the key "storetest-idempotency".
func CheckJobIdempotency(ctx context.Context, s store.JobStore, goroutines int) error {
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: idempotencyKind}}); err != nil {
		return err
	}
	const key = "storetest-idempotency"
	results := make([]*store.SubmitResult, goroutines)
	errs := make([]error, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			results[g], errs[g] = s.SubmitJob(ctx, &store.SubmitParams{Kind: idempotencyKind,
				Resource: fmt.Sprintf("idempotency/%d", g), Args: mustJSON(map[string]int{"g": g}), IdempotencyKey: key})
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("concurrent submits with one key: %w", err)
	}
	created := 0
	id := results[0].Job.ID
	for g, r := range results {
		if r.Job.ID != id {
			return fmt.Errorf("submit %d returned job %d, submit 0 job %d: one key made several jobs", g, r.Job.ID, id)
		}
		if r.Job.IdempotencyKey != key {
			return fmt.Errorf("submit %d returned a job with key %q", g, r.Job.IdempotencyKey)
		}
		if !r.Existing {
			created++
		}
	}
	if created != 1 {
		return fmt.Errorf("%d of %d submits with one key said they created the job; want 1", created, goroutines)
	}
	jobs, err := listAllJobs(ctx, s, store.JobListParams{Kind: idempotencyKind})
	if err != nil {
		return err
	}
	if len(jobs) != 1 || jobs[0].ID != id {
		return fmt.Errorf("jobs of the kind after %d submits with one key: %v; want only job %d", goroutines, ids(jobs), id)
	}
	return nil
}
