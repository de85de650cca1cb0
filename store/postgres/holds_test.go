package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// A lease on several keys takes a key that is a resource of jobs and was never locked: the
// running attempt refuses it (the key is made a lock key first, so the attempt holds its row as
// its gate), and once the lease holds it, a job submitted to it is not claimed until the lease
// ends.
func TestHoldsGateJobsOnResources(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k"})
	a := submit(t, s, "k", "res/1")
	running := claim(t, s, 1, "k")
	if len(running) != 1 || running[0].ID != a.ID {
		t.Fatalf("claimed %v; want job %d", running, a.ID)
	}
	p := &store.AcquireParams{Key: "res/0", Resources: []string{"res/1"}, LeaseID: "l1", Holder: "h1", TTL: time.Minute}
	_, err := s.Acquire(ctx, p)
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Resource != "res/1" || held.Holder != store.JobHolder(a.ID) {
		t.Fatalf("lease on a key a job runs on: %v; want ErrLockHeld naming the job on res/1", err)
	}
	if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: a.ID, Token: running[0].Token}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= running[0].Token {
		t.Fatalf("lease token %d not above the attempt's %d", l.Token, running[0].Token)
	}
	b := submit(t, s, "k", "res/1")
	if got := claim(t, s, 1, "k"); len(got) != 0 {
		t.Fatalf("claimed %v while a lease holds res/1", got)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "res/0", LeaseID: "l1"}); err != nil {
		t.Fatal(err)
	}
	got := claim(t, s, 1, "k")
	if len(got) != 1 || got[0].ID != b.ID || got[0].Token <= l.Token {
		t.Fatalf("after the release claimed %v; want job %d with a token above %d", got, b.ID, l.Token)
	}
}

// A force-release of one key of a lease made of holds ends the whole lease: its other keys and
// its units are free, its holder's release finds nothing, and the audit log records the ends.
func TestHoldsForceRelease(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, newSchema(t))
	if _, err := s.SetLimit(ctx, &store.SetLimitParams{Name: "pool", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	p := &store.AcquireParams{Key: "fr/a", Resources: []string{"fr/b"}, Limits: []string{"pool"}, LeaseID: "l1", Holder: "h1", TTL: time.Minute}
	if _, err := s.Acquire(ctx, p); err != nil {
		t.Fatal(err)
	}
	old, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "fr/b", Actor: "admin", Reason: "stuck"})
	if err != nil || old.ID != "" {
		t.Fatalf("force-release: %+v, %v; want the key's summary row", old, err)
	}
	for _, k := range []string{"fr/a", "fr/b"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s after the force-release: %v; want free", k, err)
		}
	}
	if ls, err := s.Limits(ctx, &store.LimitsParams{Name: "pool", Limit: 1}); err != nil || ls[0].InUse != 0 {
		t.Fatalf("limit after the force-release: %+v, %v", ls, err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "fr/a", LeaseID: "l1"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("release after a force-release: %v; want ErrNotHeld", err)
	}
	evs, err := s.Events(ctx, &store.EventsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range evs {
		if e.LeaseID == "" {
			t.Fatalf("event of a summary row: %+v", e)
		}
		kinds[e.Kind+"/"+e.Key+"/"+e.Limit]++
	}
	for _, want := range []string{"acquire/fr/a/", "acquire/fr/b/", "acquire/fr/a/pool",
		"force_release/fr/a/", "force_release/fr/b/", "force_release/fr/a/pool"} {
		if kinds[want] != 1 {
			t.Fatalf("events %v; want one %s", kinds, want)
		}
	}
}

// A waiter for several keys and a limit has one ticket in each line, with one arrival; leaving
// the line removes all of them.
func TestHoldsTicketsInEveryLine(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, newSchema(t))
	if _, err := s.SetLimit(ctx, &store.SetLimitParams{Name: "pool", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	hold := &store.AcquireParams{Key: "t/b", LeaseID: "l0", Holder: "h0", TTL: time.Minute}
	if _, err := s.Acquire(ctx, hold); err != nil {
		t.Fatal(err)
	}
	p := &store.AcquireParams{Key: "t/a", Resources: []string{"t/b"}, Limits: []string{"pool"}, Shared: true,
		LeaseID: "l1", Holder: "h1", TTL: time.Minute, Wait: true}
	if _, err := s.Acquire(ctx, p); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("acquire: %v; want ErrLockHeld", err)
	}
	var since time.Time
	for _, k := range []string{"t/a", "t/b"} {
		rl, err := s.ResourceLine(ctx, k, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rl.Tickets) != 1 || rl.Tickets[0].LeaseID != "l1" || !rl.Tickets[0].Shared || rl.Tickets[0].LeaseKey != "t/a" {
			t.Fatalf("line of %s: %+v; want the shared ticket of l1 under t/a", k, rl.Tickets)
		}
		if !since.IsZero() && !rl.Tickets[0].Since.Equal(since) {
			t.Fatalf("tickets arrived at %v and %v; want one arrival", since, rl.Tickets[0].Since)
		}
		since = rl.Tickets[0].Since
	}
	if ls, err := s.Limits(ctx, &store.LimitsParams{Limit: 10}); err != nil || len(ls) != 1 || ls[0].Waiting != 1 {
		t.Fatalf("limits: %+v, %v; want one waiting", ls, err)
	}
	if err := s.LeaveLine(ctx, "t/a", "l1", ""); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"t/a", "t/b"} {
		if rl, err := s.ResourceLine(ctx, k, 10); err != nil || len(rl.Tickets) != 0 {
			t.Fatalf("line of %s after leaving: %+v, %v", k, rl, err)
		}
	}
	if ls, err := s.Limits(ctx, &store.LimitsParams{Limit: 10}); err != nil || ls[0].Waiting != 0 {
		t.Fatalf("limits after leaving: %+v, %v", ls, err)
	}
}

// A waiter for several keys subscribes by its first key: the release of a plain lease on its
// other key wakes it by that key (the ticket's lease_key), in this process and through NOTIFY in
// another; so do the end of a lease made of holds and the end of a job's attempt.
func TestHoldsWaiterWokenByItsFirstKey(t *testing.T) {
	ctx := testCtx(t)
	schema := newSchema(t)
	s, other := openStore(t, schema), openStore(t, schema)
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "k"}}); err != nil {
		t.Fatal(err)
	}
	for _, release := range []string{"plain", "holds", "job"} {
		t.Run(release, func(t *testing.T) {
			a, b := "w/"+release+"/a", "w/"+release+"/b"
			hold := &store.AcquireParams{Key: b, LeaseID: "l0-" + release, Holder: "h0", TTL: time.Minute}
			end := func() error {
				_, err := s.Release(ctx, &store.ReleaseParams{Key: b, LeaseID: hold.LeaseID})
				return err
			}
			switch release {
			case "holds":
				hold.Shared = true
			case "job":
				// The key is a lock key whose row the attempt holds as its gate.
				if _, err := s.Acquire(ctx, hold); err != nil {
					t.Fatal(err)
				}
				if err := end(); err != nil {
					t.Fatal(err)
				}
				submit(t, s, "k", b)
				j := claim(t, s, 1, "k")
				if len(j) != 1 {
					t.Fatalf("claimed %v", j)
				}
				end = func() error {
					_, err := s.CompleteJob(ctx, &store.CompleteParams{ID: j[0].ID, Token: j[0].Token})
					return err
				}
			}
			if release != "job" {
				if _, err := s.Acquire(ctx, hold); err != nil {
					t.Fatal(err)
				}
			}
			p := &store.AcquireParams{Key: a, Resources: []string{b}, LeaseID: "l1-" + release, Holder: "h1", TTL: time.Minute, Wait: true}
			here, cancelHere := s.SubscribeAs(a, p.LeaseID)
			defer cancelHere()
			there, cancelThere := other.SubscribeAs(a, p.LeaseID)
			defer cancelThere()
			if _, err := s.Acquire(ctx, p); !errors.Is(err, store.ErrLockHeld) {
				t.Fatalf("acquire: %v; want ErrLockHeld", err)
			}
			if err := end(); err != nil {
				t.Fatal(err)
			}
			wantWake(t, here, "the end on "+b+" (this process)")
			wantWake(t, there, "the end on "+b+" (another process)")
			if _, err := s.Acquire(ctx, p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Plain leases, shared holds and leases on several keys on the same keys, from two stores (two
// processes) at once: an exclusive holding never overlaps another holding of its key, shared
// ones do overlap, and everyone is granted in the end (nobody waits for ever).
func TestHoldsBesidePlainLeases(t *testing.T) {
	ctx := testCtx(t)
	schema := newSchema(t)
	stores := []*postgres.Store{openStore(t, schema), openStore(t, schema)}
	type holding struct {
		keys       []string
		shared     bool
		start, end time.Time
		waited     time.Duration
	}
	var mu sync.Mutex
	var all []holding
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			locker, err := baton.NewLocker(stores[g%2], &baton.Config{PollInterval: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			for range 10 {
				h := holding{keys: []string{"mix"}}
				var opts []baton.Option
				switch g % 4 {
				case 0: // plain exclusive
				case 1:
					h.keys = append(h.keys, "mix/2")
					opts = append(opts, baton.WithResources("mix/2"))
				default:
					h.shared = true
					opts = append(opts, baton.WithShared())
				}
				called := time.Now()
				l, err := locker.Acquire(ctx, "mix", opts...)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
				h.start = time.Now()
				h.waited = h.start.Sub(called)
				time.Sleep(5 * time.Millisecond)
				h.end = time.Now()
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	overlapped := 0
	for i, a := range all {
		for _, b := range all[i+1:] {
			if !(a.start.Before(b.end) && b.start.Before(a.end)) || !slices.ContainsFunc(a.keys, func(k string) bool { return slices.Contains(b.keys, k) }) {
				continue
			}
			if !a.shared || !b.shared {
				t.Fatalf("holding of %v (shared %v) overlapped one of %v (shared %v)", a.keys, a.shared, b.keys, b.shared)
			}
			overlapped++
		}
	}
	longest := slices.MaxFunc(all, func(a, b holding) int { return int(a.waited - b.waited) })
	t.Logf("%d holdings, %d pairs of shared ones overlapped; longest wait %s (%v, shared %v)", len(all), overlapped,
		longest.waited, longest.keys, longest.shared)
}
