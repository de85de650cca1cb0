package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// One resource, one line: where leases and jobs share a store (Capabilities.OneResource), a key
// is one resource. A live lease and a running job attempt on it exclude each other, whichever
// path took it, and tokens per key strictly increase across both.

// resourceStore is a job store that also grants leases, with the one-resource capability.
func resourceStore(t *testing.T, e *jobEnv) store.Store {
	t.Helper()
	ls, ok := e.s.(store.Store)
	requireNotApplicable(t, ok, "the job store grants no leases")
	requireNotApplicable(t, ls.Capabilities().OneResource, "leases and jobs are not one resource on this store")
	return ls
}

// testOneResourceExclusion: goroutines taking leases and workers claiming jobs on the same few
// keys, at once. Each holder marks its key occupied as soon as the store granted it, and clears
// the mark before it gives the key back; a grant while the mark is set is an overlap. Grants of
// a key happen one after another (that is what is checked), so each grant's token must exceed
// the key's last: the token order is the real-time order, across leases and jobs.
func testOneResourceExclusion(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "one"})
	ls := resourceStore(t, e)
	const keys, jobsPerKey, lockers, locksEach, workers = 3, 20, 6, 15, 3
	key := func(i int) string { return "one/" + strconv.Itoa(i) }
	for i := range keys {
		for range jobsPerKey {
			e.sub("one", key(i))
		}
	}
	type slot struct {
		mu       sync.Mutex
		occupied string // who holds it, by the holders' own account
		last     uint64 // the last token granted
	}
	slots := make([]slot, keys)
	var overlaps, regressions atomic.Int64
	enter := func(i int, who string, token uint64) {
		s := &slots[i]
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.occupied != "" {
			overlaps.Add(1)
			t.Errorf("%s granted %s (token %d) while %s holds it", who, key(i), token, s.occupied)
		}
		if token <= s.last {
			regressions.Add(1)
			t.Errorf("%s granted %s with token %d, not above the last grant's %d", who, key(i), token, s.last)
		}
		s.occupied, s.last = who, max(s.last, token)
	}
	leave := func(i int) {
		s := &slots[i]
		s.mu.Lock()
		s.occupied = ""
		s.mu.Unlock()
	}
	keyIndex := func(k string) int {
		n, _ := strconv.Atoi(k[len("one/"):])
		return n
	}

	var wg sync.WaitGroup
	errs := make(chan error, lockers+workers)
	var done atomic.Int64 // jobs completed
	for l := range lockers {
		wg.Go(func() {
			holder := fmt.Sprintf("locker-%d", l)
			for n := range locksEach {
				i := (l + n) % keys
				for {
					lease, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: key(i), LeaseID: fmt.Sprintf("%s-%d", holder, n),
						Holder: holder, TTL: time.Minute})
					if errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting) {
						time.Sleep(time.Millisecond) // pacing the retries, not synchronisation
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("%s: acquire %s: %w", holder, key(i), err)
						return
					}
					enter(i, holder, lease.Token)
					leave(i)
					if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: key(i), LeaseID: lease.ID}); err != nil {
						errs <- fmt.Errorf("%s: release %s: %w", holder, key(i), err)
						return
					}
					break
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprintf("worker-%d", w)
			for done.Load() < keys*jobsPerKey {
				js, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: worker, Kinds: []string{"one"}, Limit: 2, TTL: time.Minute})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				if len(js) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				for _, j := range js {
					enter(keyIndex(j.Resource), fmt.Sprintf("%s (job %d)", worker, j.ID), j.Token)
				}
				for _, j := range js {
					leave(keyIndex(j.Resource))
					if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
						errs <- fmt.Errorf("%s: complete job %d: %w", worker, j.ID, err)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, m := overlaps.Load(), regressions.Load(); n+m > 0 {
		t.Fatalf("%d overlaps and %d token regressions between leases and job attempts", n, m)
	}
}

// testOneResourceRefusals: each side names the other when it refuses, and rests are one.
func testOneResourceRefusals(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "apply"}, store.Kind{Name: "remediate", ResourceCooldown: time.Hour})
	ls := resourceStore(t, e)
	acquire := func(key, id string) (*store.Lease, error) {
		return ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "ops-" + id, TTL: time.Minute,
			Cooldown: time.Hour})
	}

	// A running job refuses a lease, naming itself and its token.
	j := e.claimOne(e.sub("apply", "state/a").ID, "apply")
	_, err := acquire("state/a", "l1")
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Holder != store.JobHolder(j.ID) || held.Token != j.Token ||
		held.RetryAfter <= 0 || held.RetryAfter > time.Minute {
		t.Fatalf("Acquire(state/a) while job %d runs (token %d): %v; want ErrLockHeld naming %q, its token, about a minute left",
			j.ID, j.Token, err, store.JobHolder(j.ID))
	}
	done := e.complete(j)

	// Once it ends, the lease is granted above the job's token; while the lease lives, the next
	// job (submitted after the lease's request, so behind it in the line) is not claimed; the
	// lease's cooldown holds it too, until an admin clears it.
	l, err := acquire("state/a", "l2")
	if err != nil || l.Token <= done.Token {
		t.Fatalf("Acquire(state/a) after job %d ended: %+v, %v; want a grant above token %d", j.ID, l, err, done.Token)
	}
	next := e.sub("apply", "state/a")
	e.claimNone("a lease holds state/a", "apply")
	if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: "state/a", LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	e.claimNone("state/a rests after the lease (its cooldown)", "apply")
	if _, err := ls.ClearRest(e.ctx, &store.ClearRestParams{Key: "state/a", Reason: "test", Actor: "admin"}); err != nil {
		t.Fatalf("ClearRest(state/a): %v", err)
	}
	n := e.claimOne(next.ID, "apply")
	if n.Token <= l.Token {
		t.Fatalf("job %d claimed after the lease with token %d, not above the lease's %d", n.ID, n.Token, l.Token)
	}
	e.complete(n)

	// A job's resource cooldown refuses a lease as a rest, until it is cleared.
	e.complete(e.claimOne(e.sub("remediate", "node/r").ID, "remediate"))
	_, err = acquire("node/r", "l3")
	var rest *store.RestingError
	if !errors.As(err, &rest) || rest.Reason != store.ReasonResourceCooldown || rest.Remaining <= 59*time.Minute {
		t.Fatalf("Acquire(node/r) during its resource cooldown: %v; want ErrResting (%s), about an hour left",
			err, store.ReasonResourceCooldown)
	}
	if _, err := e.s.ClearResourceCooldown(e.ctx, &store.ClearCooldownParams{Resource: "node/r", Reason: "checked", Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if l, err := acquire("node/r", "l4"); err != nil {
		t.Fatalf("Acquire(node/r) after its cooldown was cleared: %v", err)
	} else if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: "node/r", LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}

	// Another key is not affected.
	if _, err := acquire("state/b", "l5"); err != nil {
		t.Fatalf("Acquire(state/b): %v", err)
	}
}

// RunOneResourceWakeUps checks that the halves wake each other in one process: a lock waiter
// subscribed to a key is woken when the job attempt holding it ends, and job workers waiting for
// a kind are woken when a lease that held back the kind's head is released. (Through the HTTP
// client the server does this waking; its tests cover it.)
func RunOneResourceWakeUps(t *testing.T, s interface {
	store.Store
	store.JobStore
}) {
	e := &jobEnv{t: t, s: s, ctx: t.Context()}
	if err := s.RegisterKinds(e.ctx, []store.Kind{{Name: "wake"}}); err != nil {
		t.Fatal(err)
	}
	j := e.claimOne(e.sub("wake", "wake/a").ID, "wake")
	lockWake, cancel := s.Subscribe("wake/a")
	defer cancel()
	// A waiting acquire is refused by the attempt (and, as with a lease, marks the key waited for).
	_, err := s.Acquire(e.ctx, &store.AcquireParams{Key: "wake/a", LeaseID: "w0", Holder: "ops", TTL: time.Minute, Wait: true})
	if !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("Acquire(wake/a) while job %d runs: %v; want ErrLockHeld", j.ID, err)
	}
	e.complete(j)
	<-lockWake // the hang guard is the test's timeout

	l, err := s.Acquire(e.ctx, &store.AcquireParams{Key: "wake/a", LeaseID: "w0", Holder: "ops", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	queued := e.sub("wake", "wake/a")
	jobWake, cancelJobs := s.SubscribeJobs("wake")
	defer cancelJobs()
	for drained := false; !drained; { // the submit woke it; that wake-up is not the one tested
		select {
		case <-jobWake:
		default:
			drained = true
		}
	}
	e.claimNone("the lease holds wake/a", "wake")
	if _, err := s.Release(e.ctx, &store.ReleaseParams{Key: "wake/a", LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	<-jobWake
	e.claimOne(queued.ID, "wake")
}
