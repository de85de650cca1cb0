package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// One line per resource (Capabilities.Line): waiting lock requests are tickets in one FIFO line
// with the resource's jobs, by arrival. The cases talk to the store as a waiter does: an Acquire
// with Wait that is refused enqueues (or keeps alive) the caller's ticket, named by its lease ID.
// Through the HTTP client such an Acquire waits in the server for a short while (enqueueWait),
// whose refusal leaves the ticket in place; so does a wait whose answer comes after enqueueWait
// (a loaded machine), which the client hangs up before asking again.

// enqueueWait bounds the server-side wait of one waiting Acquire through the HTTP client.
const enqueueWait = 400 * time.Millisecond

// lineStore is a job store that grants leases and keeps one line per key.
func lineStore(t *testing.T, e *jobEnv) store.Store {
	t.Helper()
	ls := resourceStore(t, e)
	requireNotApplicable(t, ls.Capabilities().Line, "the store keeps no line of waiters")
	return ls
}

// waitOnce is one waiting attempt: granted, or refused with the caller's ticket kept. An attempt
// that runs out of time without an answer is made again.
func waitOnce(parent context.Context, ls store.Store, key, id string, ttl time.Duration, first bool) (*store.Lease, error) {
	p := &store.AcquireParams{Key: key, LeaseID: id, Holder: "h-" + id, TTL: ttl, Wait: true}
	if first {
		p.First, p.FirstReason = true, "break-glass in a test"
	}
	return waitFor(parent, ls, p)
}

// waitFor is waitOnce of any waiting request p.
func waitFor(parent context.Context, ls store.Store, p *store.AcquireParams) (*store.Lease, error) {
	ctx, cancel := context.WithTimeout(parent, enqueueWait)
	defer cancel()
	for {
		l, err := ls.Acquire(ctx, p)
		if err == nil || errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting) || ctx.Err() == nil ||
			parent.Err() != nil {
			return l, err
		}
		// The attempt ran out of time before the store answered (a loaded machine): it may or
		// may not have enqueued the ticket, so try again; a ticket that exists keeps its place.
		ctx, cancel = context.WithTimeout(parent, enqueueWait)
		defer cancel()
	}
}

// mustQueue enqueues id's ticket and checks how many the store says wait before it.
func mustQueue(t *testing.T, ctx context.Context, ls store.Store, key, id string, ttl time.Duration, ahead int) {
	t.Helper()
	_, err := waitOnce(ctx, ls, key, id, ttl, false)
	var held *store.LockHeldError
	if !errors.As(err, &held) {
		t.Fatalf("waiting Acquire(%s) as %s: %v; want ErrLockHeld, enqueued", key, id, err)
	}
	if held.Ahead != ahead {
		t.Fatalf("waiting Acquire(%s) as %s: %d ahead, want %d (%v)", key, id, held.Ahead, ahead, err)
	}
}

func release(t *testing.T, ctx context.Context, ls store.Store, l *store.Lease) {
	t.Helper()
	if _, err := ls.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID}); err != nil {
		t.Fatalf("Release(%s, %s): %v", l.Key, l.ID, err)
	}
}

// testLineFIFO: waiters that queued one after another are granted in that order, although all
// of them retry at once whenever the key frees; every waiter that is not at the front is
// refused with its place; a newcomer without a ticket (TryAcquire) does not overtake them.
func testLineFIFO(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	ls := lineStore(t, e)
	const key, waiters = "line/fifo", 6
	first, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range waiters {
		mustQueue(t, e.ctx, ls, key, fmt.Sprint("w", i), time.Minute, i)
	}
	release(t, e.ctx, ls, first)
	_, err = ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "newcomer", Holder: "newcomer", TTL: time.Minute})
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Ahead != waiters || held.Holder != "h-w0" {
		t.Fatalf("TryAcquire of the free key with %d waiting: %v; want ErrLockHeld, %d ahead, first h-w0", waiters, err, waiters)
	}

	var (
		mu     sync.Mutex
		order  []int
		tokens []uint64
		wg     sync.WaitGroup
		errs   = make(chan error, waiters)
	)
	for i := range waiters {
		wg.Go(func() {
			id := fmt.Sprint("w", i)
			for {
				l, err := waitOnce(e.ctx, ls, key, id, time.Minute, false)
				if errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting) {
					time.Sleep(2 * time.Millisecond) // pacing the retries
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
					return
				}
				mu.Lock()
				order, tokens = append(order, i), append(tokens, l.Token)
				mu.Unlock()
				if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: id}); err != nil {
					errs <- fmt.Errorf("%s: release: %w", id, err)
				}
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !slices.IsSorted(order) || len(order) != waiters {
		t.Fatalf("grant order %v; want the order the waiters queued in, 0..%d", order, waiters-1)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens in grant order %v do not strictly increase", tokens)
		}
	}
}

// testLineAbandoned: a waiter that stops retrying holds the line no longer than its ticket's
// TTL; one that leaves (LineWaiter.LeaveLine) holds it no longer at all.
func testLineAbandoned(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	ls := lineStore(t, e)
	const key, ttl = "line/abandoned", time.Second
	hold, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	queued := time.Now() // the ticket's TTL runs from its latest refusal, after this
	mustQueue(t, e.ctx, ls, key, "gone", ttl, 0)
	mustQueue(t, e.ctx, ls, key, "next", time.Minute, 1)
	release(t, e.ctx, ls, hold)
	// "gone" never comes back: "next" is refused while gone's ticket lives, then granted.
	for {
		l, err := waitOnce(e.ctx, ls, key, "next", time.Minute, false)
		var held *store.LockHeldError
		if errors.As(err, &held) {
			if held.Holder != "h-gone" || held.Ahead != 1 {
				t.Fatalf("next refused by %q with %d ahead; want h-gone, 1 ahead", held.Holder, held.Ahead)
			}
			if e.canAdvance() {
				e.advance(ttl)
			} else {
				time.Sleep(10 * time.Millisecond) // pacing the retries while the ticket lives
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(queued); !e.canAdvance() && waited < ttl-100*time.Millisecond {
			t.Fatalf("next granted %s after the abandoned ticket was queued, before its TTL %s ran out", waited, ttl)
		}
		hold = l
		break
	}

	lw, ok := ls.(store.LineWaiter) // the HTTP client's is POST /v1/locks/leave
	if !ok {
		return
	}
	mustQueue(t, e.ctx, ls, key, "leaver", time.Hour, 0)
	mustQueue(t, e.ctx, ls, key, "after", time.Minute, 1)
	release(t, e.ctx, ls, hold)
	if err := lw.LeaveLine(e.ctx, key, "leaver", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := waitOnce(e.ctx, ls, key, "after", time.Minute, false); err != nil {
		t.Fatalf("Acquire after the waiter ahead left the line: %v", err)
	}
}

// testLineTryKeepsThePlace: a waiter's ticket keeps its place for a later attempt that does not
// wait (TryAcquire, or an HTTP poll without wait_ms) under the same lease ID: behind another
// ticket it is refused with its place, at the front it is granted and its ticket ends, so the
// line is empty once it releases.
func testLineTryKeepsThePlace(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	ls := lineStore(t, e)
	const key = "line/try"
	try := func(id string) (*store.Lease, error) {
		return ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "h-" + id, TTL: time.Minute})
	}
	hold, err := try("holder")
	if err != nil {
		t.Fatal(err)
	}
	mustQueue(t, e.ctx, ls, key, "front", time.Minute, 0)
	mustQueue(t, e.ctx, ls, key, "back", time.Minute, 1)
	release(t, e.ctx, ls, hold)
	_, err = try("back")
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Ahead != 1 || held.Holder != "h-front" {
		t.Fatalf("TryAcquire of the free key by the second ticket's lease ID: %v; want ErrLockHeld, 1 ahead, first h-front", err)
	}
	l, err := try("front")
	if err != nil {
		t.Fatalf("TryAcquire of the free key by the front ticket's lease ID: %v; want granted", err)
	}
	release(t, e.ctx, ls, l)
	if l, err = try("back"); err != nil {
		t.Fatalf("TryAcquire by the lease ID of the ticket now at the front: %v; want granted", err)
	}
	release(t, e.ctx, ls, l)
	if _, err := try("newcomer"); err != nil {
		t.Fatalf("TryAcquire of a key whose waiters were all granted: %v; want granted (no ticket left in its line)", err)
	}
}

// testLineClaimPassesBlockedHead: a head held back by a lock ticket before it does not take a
// claim's place: a claim of one job starts the next claimable head of another resource.
func testLineClaimPassesBlockedHead(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "line"})
	ls := lineStore(t, e)
	const key = "line/blocked"
	hold, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mustQueue(t, e.ctx, ls, key, "lock", time.Minute, 0)
	blocked := e.sub("line", key)
	other := e.sub("line", "line/other")
	release(t, e.ctx, ls, hold) // the key is free, and the lock's ticket is before the job
	js := e.claim(1, "line")
	if len(js) != 1 || js[0].ID != other.ID {
		t.Fatalf("a claim of one job: %v; want job %d (job %d waits behind the lock request)", ids(js), other.ID, blocked.ID)
	}
	e.complete(js[0])
	e.claimNone(fmt.Sprintf("job %d waits behind the lock request", blocked.ID), "line")
}

// testLineWithJobs: lock tickets and jobs share one line by arrival. A job submitted before a
// lock request runs first; a job submitted after it waits for it; a head job that is not ready
// holds no lock up; a break-glass request goes before both and still waits for the holder.
func testLineWithJobs(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "line"})
	ls := lineStore(t, e)
	const key = "line/jobs"
	j1 := e.sub("line", key)
	mustQueue(t, e.ctx, ls, key, "lock", time.Minute, 1)
	j2 := e.sub("line", key)
	c1 := e.claimOne(j1.ID, "line")
	e.complete(c1)
	e.claimNone("the lock request arrived before job 2", "line")
	l, err := waitOnce(e.ctx, ls, key, "lock", time.Minute, false)
	if err != nil {
		t.Fatalf("the lock request at the front after job 1: %v", err)
	}
	if l.Token <= c1.Token {
		t.Fatalf("lease token %d not above job 1's %d", l.Token, c1.Token)
	}
	e.claimNone("the lease holds the key", "line")
	release(t, e.ctx, ls, l)
	c2 := e.claimOne(j2.ID, "line")
	if c2.Token <= l.Token {
		t.Fatalf("job 2's token %d not above the lease's %d", c2.Token, l.Token)
	}
	e.complete(c2)

	// A head scheduled for later (or backing off) lets a lock go first.
	later := e.submit(store.SubmitParams{Kind: "line", Resource: "line/later", Delay: time.Hour})
	if l, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "line/later", LeaseID: "now", Holder: "now", TTL: time.Minute}); err != nil {
		t.Fatalf("Acquire beside job %d scheduled in an hour: %v; want granted", later.ID, err)
	} else {
		release(t, e.ctx, ls, l)
	}

	// Break-glass: before the waiting lock and the queued job, after the holder.
	const bg = "line/break-glass"
	hold, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: bg, LeaseID: "holder", Holder: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mustQueue(t, e.ctx, ls, bg, "plain", time.Minute, 0)
	queued := e.sub("line", bg)
	if _, err := waitOnce(e.ctx, ls, bg, "first", time.Minute, true); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("break-glass request while the key is held: %v; want ErrLockHeld (it waits for the holder)", err)
	}
	release(t, e.ctx, ls, hold)
	e.claimNone("two lock requests are ahead of the job", "line")
	if _, err := waitOnce(e.ctx, ls, bg, "plain", time.Minute, false); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("the earlier plain request overtook the break-glass one: %v", err)
	}
	f, err := waitOnce(e.ctx, ls, bg, "first", time.Minute, true)
	if err != nil {
		t.Fatalf("break-glass request after the holder released: %v", err)
	}
	release(t, e.ctx, ls, f)
	p, err := waitOnce(e.ctx, ls, bg, "plain", time.Minute, false)
	if err != nil {
		t.Fatalf("plain request after the break-glass one: %v", err)
	}
	release(t, e.ctx, ls, p)
	e.complete(e.claimOne(queued.ID, "line"))
}

// testLineNoStarvation: a steady stream of lock requests and jobs on one key. Every job runs and
// every lock request is granted; lock requests are granted in the order they queued, and no
// holder overlaps another.
func testLineNoStarvation(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "stream"})
	ls := lineStore(t, e)
	const key, lockers, rounds, jobs = "line/stream", 4, 5, 20
	var (
		qmu       sync.Mutex // orders the queueing of lock requests: one at a time
		mu        sync.Mutex
		queued    []string // lock requests in the order they queued
		granted   []string // in the order they were granted
		busy      string
		overlaps  int
		wg        sync.WaitGroup
		errs      = make(chan error, lockers+1)
		jobsDone  int
		jobsMu    sync.Mutex
		submitted []int64
	)
	occupy := func(who string) {
		mu.Lock()
		defer mu.Unlock()
		if busy != "" {
			overlaps++
			t.Errorf("%s granted while %s holds the key", who, busy)
		}
		busy = who
	}
	vacate := func() { mu.Lock(); busy = ""; mu.Unlock() }
	for range jobs - lockers*((rounds+1)/2) {
		submitted = append(submitted, e.sub("stream", key).ID)
	}
	for w := range lockers {
		wg.Go(func() {
			for r := range rounds {
				id := fmt.Sprintf("l%d-%d", w, r)
				qmu.Lock()
				l, err := waitOnce(e.ctx, ls, key, id, time.Minute, false)
				if err == nil || errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting) {
					mu.Lock()
					queued = append(queued, id) // granted at once, or queued
					mu.Unlock()
				}
				qmu.Unlock()
				for err != nil {
					if !errors.Is(err, store.ErrLockHeld) && !errors.Is(err, store.ErrResting) {
						errs <- fmt.Errorf("%s: %w", id, err)
						return
					}
					time.Sleep(2 * time.Millisecond) // pacing the retries
					l, err = waitOnce(e.ctx, ls, key, id, time.Minute, false)
				}
				occupy(id)
				mu.Lock()
				granted = append(granted, id)
				mu.Unlock()
				vacate()
				if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: l.ID}); err != nil {
					errs <- fmt.Errorf("%s: release: %w", id, err)
					return
				}
				if r%2 == 0 {
					j := e.sub("stream", key)
					jobsMu.Lock()
					submitted = append(submitted, j.ID)
					jobsMu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for {
			jobsMu.Lock()
			finished := jobsDone == jobs
			jobsMu.Unlock()
			if finished {
				return
			}
			js, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"stream"}, Limit: 1, TTL: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			if len(js) == 0 {
				time.Sleep(2 * time.Millisecond) // pacing the claims
				continue
			}
			occupy(fmt.Sprint("job ", js[0].ID))
			vacate()
			if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token}); err != nil {
				errs <- err
				return
			}
			jobsMu.Lock()
			jobsDone++
			jobsMu.Unlock()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if overlaps > 0 {
		t.Fatalf("%d overlaps", overlaps)
	}
	if !slices.Equal(queued, granted) {
		t.Fatalf("lock requests granted in the order\n%v\nbut queued in\n%v", granted, queued)
	}
	if len(submitted) != jobs {
		t.Fatalf("%d jobs submitted, want %d", len(submitted), jobs)
	}
}

// testLineVisible: ResourceLine shows who holds a key, whether it rests and why, and who waits,
// in order, whatever path each came from.
func testLineVisible(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "see"}, store.Kind{Name: "cool", ResourceCooldown: time.Hour})
	ls := lineStore(t, e)
	lr, ok := ls.(store.LineReader)
	requireNotApplicable(t, ok, "the store does not read lines (LineReader)")
	view := func(key string) *store.ResourceLine {
		t.Helper()
		v, err := lr.ResourceLine(e.ctx, key, 100)
		if err != nil {
			t.Fatalf("ResourceLine(%s): %v", key, err)
		}
		return v
	}
	if v := view("see/none"); v.Holder != nil || v.Rest != nil || len(v.Tickets) != 0 {
		t.Fatalf("ResourceLine of an unknown key: %+v; want empty", v)
	}

	const key = "see/a"
	l, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "ops", TTL: time.Minute, Cooldown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mustQueue(t, e.ctx, ls, key, "w1", time.Minute, 0)
	j := e.sub("see", key)
	mustQueue(t, e.ctx, ls, key, "w2", time.Minute, 2)
	v := view(key)
	if v.Holder == nil || v.Holder.Holder != "ops" || v.Holder.Token != l.Token || v.HolderJob != 0 || v.Rest != nil {
		t.Fatalf("ResourceLine(%s) held by a lease: holder %+v job %d rest %+v; want ops, token %d", key, v.Holder, v.HolderJob, v.Rest, l.Token)
	}
	want := []string{"h-w1", store.JobHolder(j.ID), "h-w2"}
	if len(v.Tickets) != len(want) {
		t.Fatalf("ResourceLine(%s): %d tickets, want %v", key, len(v.Tickets), want)
	}
	for i, tk := range v.Tickets {
		if tk.Holder != want[i] || tk.Position != i+1 {
			t.Fatalf("ticket %d: %s at position %d; want %s at %d", i, tk.Holder, tk.Position, want[i], i+1)
		}
	}
	if tk := v.Tickets[1]; tk.Job != j.ID || tk.JobKind != "see" || !tk.ExpiresAt.IsZero() || v.Tickets[0].ExpiresAt.IsZero() {
		t.Fatalf("the job's ticket %+v, the lock's %+v; want job %d of kind see without expiry, the lock's with one", tk, v.Tickets[0], j.ID)
	}
	release(t, e.ctx, ls, l)
	if v := view(key); v.Holder != nil || v.Rest == nil || v.Rest.Reason != store.ReasonCooldown || v.Rest.Remaining <= 59*time.Minute {
		t.Fatalf("ResourceLine(%s) after a release with a cooldown: holder %+v rest %+v; want resting (cooldown), about an hour", key, v.Holder, v.Rest)
	}

	// A running job holds the key; after a kind with a resource cooldown, the key rests.
	c := e.claimOne(e.sub("cool", "see/b").ID, "cool")
	if v := view("see/b"); v.HolderJob != c.ID || v.Holder == nil || v.Holder.Holder != store.JobHolder(c.ID) || v.Holder.Token != c.Token {
		t.Fatalf("ResourceLine(see/b) while job %d runs: holder %+v job %d; want the job, token %d", c.ID, v.Holder, v.HolderJob, c.Token)
	}
	e.complete(c)
	if v := view("see/b"); v.Holder != nil || v.Rest == nil || v.Rest.Reason != store.ReasonResourceCooldown {
		t.Fatalf("ResourceLine(see/b) after a job with a resource cooldown: holder %+v rest %+v; want resting (%s)", v.Holder, v.Rest, store.ReasonResourceCooldown)
	}
	if _, err := lr.ResourceLine(e.ctx, "see/a", 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("ResourceLine with limit 0: %v; want ErrInvalidArgument", err)
	}
}
