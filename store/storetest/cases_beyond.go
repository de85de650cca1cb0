package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/store"
)

// Beyond one at a time (store/holds.go): shared and exclusive holders, limits of N and leases on
// several keys. The concurrent cases record every holding as an interval, from the return of the
// grant to the call of the release: it lies inside the store's own holding, so two intervals
// that overlap show two holdings that overlapped in the store.

// holding is one recorded lease.
type holding struct {
	keys       []string
	limits     []string
	slots      map[string]int // the slot of each of limits
	shared     bool
	token      uint64
	called     time.Time // the acquire was called
	start, end time.Time // granted, released
}

// holdings collects the holdings of a concurrent run.
type holdings struct {
	mu  sync.Mutex
	all []*holding
}

func (h *holdings) add(x *holding) {
	h.mu.Lock()
	h.all = append(h.all, x)
	h.mu.Unlock()
}

// checkExclusion fails on an exclusive holding of a key that overlaps any other holding of it, and
// returns the most shared holdings of one key seen at once.
func checkExclusion(t *testing.T, all []*holding) (maxShared int) {
	t.Helper()
	byKey := map[string][]*holding{}
	for _, x := range all {
		for _, k := range x.keys {
			byKey[k] = append(byKey[k], x)
		}
	}
	for k, xs := range byKey {
		for i, a := range xs {
			together := 1
			for j, b := range xs {
				if i == j || !(a.start.Before(b.end) && b.start.Before(a.end)) {
					continue
				}
				if !a.shared || !b.shared {
					t.Fatalf("key %q: %s holding (token %d) overlapped %s holding (token %d)", k, mode(a), a.token, mode(b), b.token)
				}
				together++
			}
			maxShared = max(maxShared, together)
		}
	}
	return maxShared
}

func mode(x *holding) string {
	if x.shared {
		return "shared"
	}
	return "exclusive"
}

// checkCapacity fails when more than n holdings of limit name overlap at any instant, and returns
// the most seen at once.
func checkCapacity(t *testing.T, all []*holding, name string, n int) (most int) {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, x := range all {
		if slices.Contains(x.limits, name) {
			edges = append(edges, edge{x.start, 1}, edge{x.end, -1})
		}
	}
	// Ends before starts at one instant: intervals are half-open.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	cur := 0
	for _, e := range edges {
		cur += e.delta
		if cur > n {
			t.Fatalf("limit %q: %d holders at once, capacity %d", name, cur, n)
		}
		most = max(most, cur)
	}
	return most
}

// checkSlots fails when a holding of limit name holds no slot or one outside 0..n-1, or when two
// holdings of it that overlap hold the same slot: each slot is a fenced key of its own
// (fence.LimitSlotKey), which one holder at a time may use.
func checkSlots(t *testing.T, all []*holding, name string, n int) {
	t.Helper()
	var xs []*holding
	for _, x := range all {
		if !slices.Contains(x.limits, name) {
			continue
		}
		slot, ok := x.slots[name]
		if !ok || slot < 0 || slot >= n {
			t.Fatalf("limit %q of capacity %d: holding (token %d) has slots %v", name, n, x.token, x.slots)
		}
		for _, y := range xs {
			if y.slots[name] == slot && x.start.Before(y.end) && y.start.Before(x.end) {
				t.Fatalf("limit %q: holdings (tokens %d and %d) overlapped in slot %d", name, y.token, x.token, slot)
			}
		}
		xs = append(xs, x)
	}
}

// checkTokenOrder fails when a holding granted after another ended... in real time: when the
// acquire of b was called after a was granted, on a common key or limit, b's token must be
// greater.
func checkTokenOrder(t *testing.T, all []*holding) {
	t.Helper()
	for _, a := range all {
		for _, b := range all {
			if a == b || !b.called.After(a.start) || !shareAny(a, b) {
				continue
			}
			if b.token <= a.token {
				t.Fatalf("token %d granted after token %d on %v/%v was granted, not greater", b.token, a.token, b.keys, b.limits)
			}
		}
	}
}

func shareAny(a, b *holding) bool {
	for _, k := range a.keys {
		if slices.Contains(b.keys, k) {
			return true
		}
	}
	for _, l := range a.limits {
		if slices.Contains(b.limits, l) {
			return true
		}
	}
	return false
}

// hold acquires key with opts (waiting), records the holding, keeps it for a moment and releases.
func (e *env) hold(h *holdings, key string, shared bool, resources, limits []string, opts ...baton.Option) error {
	opts = append(opts, baton.WithResources(resources...), baton.WithLimits(limits...))
	if shared {
		opts = append(opts, baton.WithShared())
	}
	x := &holding{keys: append([]string{key}, resources...), limits: limits, shared: shared, called: time.Now()}
	l, err := e.locker.Acquire(e.ctx, key, opts...)
	if err != nil {
		return err
	}
	x.start, x.token, x.slots = time.Now(), l.Token, l.Slots
	if l.Shared != shared || !slices.Equal(l.Resources, resources) && len(resources) > 0 || !slices.Equal(l.Limits, limits) && len(limits) > 0 {
		return fmt.Errorf("lease says shared %v resources %v limits %v, asked %v %v %v", l.Shared, l.Resources, l.Limits, shared, resources, limits)
	}
	time.Sleep(e.holdFor + time.Duration(rand.IntN(300))*time.Microsecond) // the work: not a synchronisation
	x.end = time.Now()
	h.add(x)
	return l.Release(e.ctx)
}

func requireLimits(t *testing.T, e *env) store.Limiter {
	t.Helper()
	lim, ok := e.store.(store.Limiter)
	requireNotApplicable(t, ok && e.store.Capabilities().Limits, "the store keeps no limits, shared holds or leases on several keys")
	return lim
}

func (e *env) setLimit(lim store.Limiter, name string, n int) {
	e.t.Helper()
	if _, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: name, Capacity: n, Actor: "test"}); err != nil {
		e.t.Fatal(err)
	}
}

// run runs n goroutines of iters holdings each, picked by pick, and fails on any error.
func (e *env) run(n, iters int, h *holdings, pick func(g, i int) error) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iters {
				if err := pick(g, i); err != nil {
					errs <- fmt.Errorf("goroutine %d, holding %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// testSharedAndExclusive: many goroutines ask for one key, a third of them exclusive: an
// exclusive holder is never beside anyone, shared holders do hold it together, and tokens
// increase in real-time order. 12 goroutines (2 exclusive on the key and a side key, 2
// exclusive on the key alone, 8 shared) of 12 holdings of 20 ms, long enough beside a grant for
// a wrong one to land inside it: a SQLite store that grants an exclusive request beside shared
// holders failed it in 10 runs of 10, and so did one that grants a shared request beside an
// exclusive holder.
func testSharedAndExclusive(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireLimits(t, e)
	e.holdFor = 20 * time.Millisecond
	var hs holdings
	e.run(12, 12, &hs, func(g, i int) error {
		if g%6 == 0 {
			// An exclusive lease on two keys, one of them the shared one.
			return e.hold(&hs, "shared-key", false, []string{fmt.Sprintf("side/%d", g)}, nil)
		}
		return e.hold(&hs, "shared-key", g%3 != 0, nil, nil)
	})
	most := checkExclusion(t, hs.all)
	checkTokenOrder(t, hs.all)
	if most < 2 {
		t.Fatalf("shared holders never held the key together (%d holdings): shared mode did not share", len(hs.all))
	}
	t.Logf("%d holdings, up to %d shared at once", len(hs.all), most)
}

// testSharedWaitsBehindExclusive: a waiting exclusive request stops later shared ones from
// overtaking it, so writers never starve; shared requests before it go together.
func testSharedWaitsBehindExclusive(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireLimits(t, e)
	const key = "writer"
	r1 := e.acquire(key, baton.WithShared())
	r2 := e.acquire(key, baton.WithShared()) // shared with shared: at once
	if r2.Token <= r1.Token {
		t.Fatalf("second shared token %d not greater than %d", r2.Token, r1.Token)
	}
	if _, err := e.locker.TryAcquire(e.ctx, key); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("exclusive beside shared holders: %v, want ErrLockHeld", err)
	}
	if lr, ok := e.store.(store.LineReader); ok && e.store.Capabilities().Line {
		view, err := lr.ResourceLine(e.ctx, key, 10)
		if errors.Is(err, store.ErrUnsupported) {
			view, err = nil, nil // a server whose store has no resource view (no job queue)
		}
		if err == nil && view != nil && (view.Holder == nil || len(view.Holders) != 2 || view.Holders[0].Token != r1.Token ||
			view.Holders[1].Token != r2.Token || !view.Holders[0].Shared) || err != nil {
			t.Fatalf("resource view of two shared holders: %+v, %v", view, err)
		}
	}
	granted := make(chan *baton.Lease, 1)
	go func() {
		w, err := e.locker.Acquire(e.ctx, key)
		if err != nil {
			t.Error(err)
		}
		granted <- w
	}()
	// Once the writer waits in line, a newcomer reader is refused although only readers hold.
	var held *store.LockHeldError
	for {
		r, err := e.locker.TryAcquire(e.ctx, key, baton.WithShared())
		if errors.As(err, &held) && held.Ahead > 0 {
			break
		}
		if err == nil {
			// Granted before the writer queued: release that reader, and look again.
			if err := r.Release(e.ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.As(err, &held) {
			t.Fatal(err)
		}
	}
	if !held.Shared && held.Ahead == 0 {
		t.Fatalf("refusal %v", held)
	}
	if err := r1.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-granted:
		t.Fatalf("writer granted (token %d) while a reader held", w.Token)
	default:
	}
	if err := r2.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	w := <-granted
	if w == nil {
		t.FailNow()
	}
	if w.Token <= r2.Token {
		t.Fatalf("writer's token %d not greater than the readers' %d", w.Token, r2.Token)
	}
	_ = w.Release(e.ctx)
}

// testLimitCapacity: 64 goroutines on 64 keys share a limit of 3: never more than 3 hold it at
// once, as recorded by the holders and as replayed from the audit log; all 3 units are used.
func testLimitCapacity(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	lim := requireLimits(t, e)
	const n = 3
	e.setLimit(lim, "zone/eu-1a", n)
	// Long enough beside a grant for others to be granted meanwhile: with 5 ms, a CI run on a
	// loaded machine granted SQLite's units one at a time and saw 1 holder at most.
	e.holdFor = 25 * time.Millisecond
	var hs holdings
	e.run(64, 2, &hs, func(g, i int) error {
		return e.hold(&hs, fmt.Sprintf("node/%d", g), false, nil, []string{"zone/eu-1a"})
	})
	most := checkCapacity(t, hs.all, "zone/eu-1a", n)
	checkSlots(t, hs.all, "zone/eu-1a", n)
	checkTokenOrder(t, hs.all)
	if most < 2 {
		t.Fatalf("never 2 holders at once of a limit of %d under 64 requesters: the limit is a mutex", n)
	}
	ls, err := lim.Limits(e.ctx, &store.LimitsParams{Name: "zone/eu-1a", Limit: 10})
	if err != nil || len(ls) != 1 || ls[0].InUse != 0 || ls[0].Capacity != n || ls[0].Waiting != 0 {
		t.Fatalf("after the run: %+v, %v", ls, err)
	}
	if e.store.Capabilities().Audit {
		replayLimit(t, e, "zone/eu-1a", n, len(hs.all))
	}
}

// replayLimit replays the audit log's grants and releases of limit name's units and fails if
// more than n were held at once or grants are missing.
func replayLimit(t *testing.T, e *env, name string, n, grants int) {
	t.Helper()
	cur, most, seen := 0, 0, 0
	var after uint64
	for {
		evs, err := e.store.Events(e.ctx, &store.EventsParams{After: after, Limit: store.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			after = ev.ID
			if ev.Limit != name {
				continue
			}
			switch ev.Kind {
			case store.EventAcquire:
				cur++
				seen++
			case store.EventRelease, store.EventForceRelease:
				cur--
			}
			if cur > n {
				t.Fatalf("audit log: %d units of %q held at once (event %d), capacity %d", cur, name, ev.ID, n)
			}
			most = max(most, cur)
		}
		if len(evs) < store.MaxListLimit {
			break
		}
	}
	if seen != grants {
		t.Fatalf("audit log has %d grants of %q, the holders %d", seen, name, grants)
	}
	t.Logf("audit log: %d grants, at most %d held at once", seen, most)
}

// testSeveralResources: 16 goroutines lock 2 or 3 of 6 keys at once, named in random order:
// nobody deadlocks, no key is held twice, tokens increase per key. Each holding lasts 20 ms, long
// enough beside a grant for a wrong one to land inside it: a SQLite store that checks only the
// first key of a request failed this in 10 runs of 10, where 32 goroutines of 8 holdings of
// 1 ms passed it 3 times of 3 (its grants, one writer at a time, rarely fell inside 1 ms).
func testSeveralResources(t *testing.T, h Harness) {
	const goroutines, each = 16, 6
	e := newEnv(t, h, nil)
	requireLimits(t, e)
	keys := []string{"k/a", "k/b", "k/c", "k/d", "k/e", "k/f"}
	e.holdFor = 20 * time.Millisecond
	var hs holdings
	e.run(goroutines, each, &hs, func(g, i int) error {
		pick := slices.Clone(keys)
		rand.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
		pick = pick[:2+rand.IntN(2)]
		return e.hold(&hs, pick[0], false, pick[1:], nil)
	})
	checkExclusion(t, hs.all)
	checkTokenOrder(t, hs.all)
	if len(hs.all) != goroutines*each {
		t.Fatalf("%d holdings, want %d", len(hs.all), goroutines*each)
	}
}

// testSeveralResourcesAllOrNothing: a request whose second key is held is granted nothing, and
// waits in both lines: a later request for its free key alone waits behind it (FIFO per key).
func testSeveralResourcesAllOrNothing(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireLimits(t, e)
	b := e.acquire("aon/b")
	_, err := e.locker.TryAcquire(e.ctx, "aon/a", baton.WithResources("aon/b"))
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Resource != "aon/b" || held.Holder != b.Holder {
		t.Fatalf("request for a free key and a held one: %v, want ErrLockHeld naming aon/b and its holder", err)
	}
	if _, err := e.store.Get(e.ctx, "aon/a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused request left aon/a held: %v", err)
	}
	granted := make(chan *baton.Lease, 1)
	go func() {
		l, err := e.locker.Acquire(e.ctx, "aon/a", baton.WithResources("aon/b"))
		if err != nil {
			t.Error(err)
		}
		granted <- l
	}()
	// The waiter's ticket in aon/a's line keeps a newcomer for aon/a alone out.
	for {
		l, err := e.locker.TryAcquire(e.ctx, "aon/a")
		if errors.As(err, &held) && held.Ahead > 0 {
			break
		}
		if err == nil {
			// Granted before the request for both queued: release it, and look again.
			if err := l.Release(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	l := <-granted
	if l == nil {
		t.FailNow()
	}
	if l.Token <= b.Token || !slices.Equal(l.Resources, []string{"aon/b"}) {
		t.Fatalf("grant of both: token %d (aon/b's was %d), resources %v", l.Token, b.Token, l.Resources)
	}
	for _, k := range []string{"aon/a", "aon/b"} {
		if _, err := e.locker.TryAcquire(e.ctx, k); !errors.Is(err, baton.ErrLockHeld) {
			t.Fatalf("%s beside the lease on both: %v", k, err)
		}
	}
	if err := l.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.acquire("aon/a")
	e.acquire("aon/b")
}

// testLimitSlots: the units of a limit of 3 held at once take slots 0, 1 and 2; a freed slot
// goes to the next grant with a greater token; a renew keeps the slot; a slot of a limit lowered
// below its use is not reused until the use drops below the new capacity.
func testLimitSlots(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	lim := requireLimits(t, e)
	e.setLimit(lim, "slots", 3)
	var held []*baton.Lease
	seen := map[int]bool{}
	for i := range 3 {
		l := e.acquire(fmt.Sprintf("slots/%d", i), baton.WithLimits("slots"))
		slot, ok := l.Slots["slots"]
		if !ok || slot < 0 || slot > 2 || seen[slot] {
			t.Fatalf("unit %d of a limit of 3 has slots %v; slots seen before %v", i, l.Slots, seen)
		}
		seen[slot] = true
		held = append(held, l)
	}
	freed := held[1].Slots["slots"]
	if err := held[1].Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	next := e.acquire("slots/next", baton.WithLimits("slots"))
	if next.Slots["slots"] != freed || next.Token <= held[1].Token {
		t.Fatalf("after slot %d (token %d) was freed the next unit took slot %d (token %d)", freed, held[1].Token,
			next.Slots["slots"], next.Token)
	}
	r, err := e.store.Renew(e.ctx, &store.RenewParams{Key: held[2].Key, LeaseID: held[2].ID, TTL: time.Minute})
	if err != nil || r.Slots["slots"] != held[2].Slots["slots"] {
		t.Fatalf("the store's renew reports slots %v (%v), the grant said %v", r.Slots, err, held[2].Slots)
	}
	// Lowered to 1 with 3 in use: the units keep their slots, and none is granted until one is left.
	e.setLimit(lim, "slots", 1)
	for _, l := range []*baton.Lease{held[0], held[2]} {
		if err := l.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.locker.TryAcquire(e.ctx, "slots/late", baton.WithLimits("slots")); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("a unit of a limit lowered to 1 with 1 in use: %v, want ErrLockHeld", err)
	}
	if err := next.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if l := e.acquire("slots/late", baton.WithLimits("slots")); l.Slots["slots"] != 0 {
		t.Fatalf("the one unit of a limit of 1 took slot %d, want 0", l.Slots["slots"])
	}
}

// testLimitLowered: lowering a limit below its use evicts nobody; new grants wait until the use
// drops below the new capacity. A full limit is named in the refusal.
func testLimitLowered(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	lim := requireLimits(t, e)
	e.setLimit(lim, "pool", 2)
	a := e.acquire("pool", baton.WithShared(), baton.WithLimits("pool"))
	b := e.acquire("pool", baton.WithShared(), baton.WithLimits("pool"))
	_, err := e.locker.TryAcquire(e.ctx, "pool", baton.WithShared(), baton.WithLimits("pool"))
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Limit != "pool" || held.InUse != 2 || held.Capacity != 2 {
		t.Fatalf("third unit of a limit of 2: %v, want the limit named full", err)
	}
	e.setLimit(lim, "pool", 1)
	if err := a.Renew(e.ctx); err != nil {
		t.Fatalf("holder renewed after its limit was lowered: %v", err)
	}
	if err := a.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.locker.TryAcquire(e.ctx, "pool", baton.WithShared(), baton.WithLimits("pool")); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("a unit granted with 1 in use of a limit lowered to 1: %v", err)
	}
	if err := b.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.acquire("pool", baton.WithShared(), baton.WithLimits("pool"))
	if err := lim.DeleteLimit(e.ctx, &store.DeleteLimitParams{Name: "pool"}); !errors.Is(err, store.ErrLimitInUse) {
		t.Fatalf("delete of a held limit: %v, want ErrLimitInUse", err)
	}
}

// testBeyondBadInput: bad limits and requests are refused naming the field, and write nothing.
func testBeyondBadInput(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	lim := requireLimits(t, e)
	for _, n := range []int{0, -1, store.MaxLimitCapacity + 1} {
		_, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: "bad", Capacity: n})
		wantInvalid(t, "capacity", err, "capacity")
	}
	if ls, err := lim.Limits(e.ctx, &store.LimitsParams{Limit: 10}); err != nil || len(ls) != 0 {
		t.Fatalf("refused limits were written: %+v, %v", ls, err)
	}
	_, err := e.locker.TryAcquire(e.ctx, "bad", baton.WithLimits("no-such-limit"))
	wantInvalid(t, "limits", err, "limits")
	many := make([]string, store.MaxResources+1)
	for i := range many {
		many[i] = fmt.Sprintf("bad/%d", i)
	}
	_, err = e.locker.TryAcquire(e.ctx, "bad", baton.WithResources(many...))
	wantInvalid(t, "resources", err, "resources")
	_, err = e.locker.TryAcquire(e.ctx, "bad", baton.WithResources("bad"))
	wantInvalid(t, "resources", err, "resources")
	if _, err := e.store.Get(e.ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused request left the key held: %v", err)
	}
	if err := lim.DeleteLimit(e.ctx, &store.DeleteLimitParams{Name: "no-such-limit"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of an unknown limit: %v, want ErrNotFound", err)
	}
}

// testBeyondUnsupported: a store without limits refuses shared, several-key and limited requests
// naming the feature, and grants nothing.
func testBeyondUnsupported(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, !e.store.Capabilities().Limits, "the store keeps limits")
	for _, opt := range []baton.Option{baton.WithShared(), baton.WithResources("other"), baton.WithLimits("l")} {
		_, err := e.locker.TryAcquire(e.ctx, "unsupported", opt)
		var u *store.UnsupportedError
		if !errors.As(err, &u) || u.Feature == "" || u.Store == "" {
			t.Fatalf("got %v, want ErrUnsupported naming the store and the feature", err)
		}
	}
	if _, err := e.store.Get(e.ctx, "unsupported"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unsupported request left the key held: %v", err)
	}
}

// testHoldsAreNobodysLease: a key held through holds is no plain lease of their holder's name: a
// plain acquire under that holder name is refused (waiting or not), and the holds keep the key.
func testHoldsAreNobodysLease(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireLimits(t, e)
	if _, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "same/k", Shared: true, LeaseID: "l1", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []bool{false, true} {
		_, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "same/k", LeaseID: "l2", Holder: "h", TTL: time.Second, Wait: wait})
		if !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("plain acquire (wait %v) under the holds' holder name: %v; want ErrLockHeld", wait, err)
		}
	}
	l, err := e.store.Get(e.ctx, "same/k")
	if err != nil || l.TTLLeft < 30*time.Second {
		t.Fatalf("the key after the refusals: %+v, %v; want it held for about a minute", l, err)
	}
}

// testLimitUnitExpires: the unit of a holder that stops renewing (a crash) comes back when its
// lease expires: a waiter for a limit of 1 is granted then, with a greater token, and not
// before (the expired holder's release is refused).
func testLimitUnitExpires(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	lim := requireLimits(t, e)
	e.setLimit(lim, "pool/one", 1)
	crashed, err := e.locker.TryAcquire(e.ctx, "worker/a", baton.WithLimits("pool/one"), baton.WithTTL(time.Second),
		baton.WithKeepalive(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.locker.TryAcquire(e.ctx, "worker/b", baton.WithLimits("pool/one")); !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("second unit of a limit of 1 while the first is live: %v; want ErrLockHeld", err)
	}
	next, err := e.locker.Acquire(e.ctx, "worker/b", baton.WithLimits("pool/one"), baton.WithWaitTimeout(30*time.Second))
	if err != nil {
		t.Fatalf("waiting for the unit of a crashed holder: %v", err)
	}
	if next.Token <= crashed.Token {
		t.Fatalf("the unit after expiry has token %d, not above the crashed holder's %d", next.Token, crashed.Token)
	}
	// The one slot passed on: a resource that fences it refuses the crashed holder's late call.
	if crashed.Slots["pool/one"] != 0 || next.Slots["pool/one"] != 0 {
		t.Fatalf("slots of a limit of 1: %v then %v, want 0 both", crashed.Slots, next.Slots)
	}
	fs := fence.NewMemoryStore()
	slot := fence.LimitSlotKey("pool/one", next.Slots["pool/one"])
	leave, err := fs.Enter(e.ctx, slot, next.Token)
	if err != nil {
		t.Fatal(err)
	}
	leave()
	if _, err := fs.Enter(e.ctx, slot, crashed.Token); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the crashed holder's late call on its former slot: %v, want refused as stale", err)
	}
	if err := crashed.Release(e.ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("release by the crashed holder after expiry: %v; want ErrNotHeld", err)
	}
	if err := next.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// testForceReleaseEndsHolds: force-releasing one key of a lease on several keys and a limit ends
// the whole lease: its other key and its unit are free at once, and its holder's renew is
// refused.
func testForceReleaseEndsHolds(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	lim := requireLimits(t, e)
	e.setLimit(lim, "pool/fr", 1)
	l, err := e.locker.TryAcquire(e.ctx, "fr/a", baton.WithResources("fr/b"), baton.WithLimits("pool/fr"),
		baton.WithKeepalive(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.locker.ForceRelease(e.ctx, "fr/b", "wedged"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		opts []baton.Option
	}{{"fr/a", nil}, {"fr/b", nil}, {"fr/other", []baton.Option{baton.WithLimits("pool/fr")}}} {
		got, err := e.locker.TryAcquire(e.ctx, c.key, c.opts...)
		if err != nil {
			t.Fatalf("%s after a force-release of fr/b ended the lease: %v", c.key, err)
		}
		if got.Token <= l.Token {
			t.Fatalf("%s granted with token %d, not above the ended lease's %d", c.key, got.Token, l.Token)
		}
		if err := got.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Renew(e.ctx, &store.RenewParams{Key: "fr/a", LeaseID: l.ID, TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew of the force-ended lease: %v; want ErrNotHeld", err)
	}
}
