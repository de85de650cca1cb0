package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// Trees (store/trees.go): the compatibility matrix, exhaustively; parent and child holders under
// concurrency; the order of related lines; wake-ups across them; bad input; and a tree that cannot
// change while it is in use. Every case is skipped on a store that keeps no trees (store.Treer).

// requireTrees returns the store as a store.Treer, or skips the test: the store is no Treer, or
// it is one that answers *store.UnsupportedError (the HTTP client of a server whose store keeps
// no trees).
func requireTrees(t *testing.T, s store.Store) store.Treer {
	t.Helper()
	tr, ok := s.(store.Treer)
	if ok {
		_, err := tr.Trees(context.Background(), &store.TreesParams{Limit: 1})
		var u *store.UnsupportedError
		ok = !errors.As(err, &u)
	}
	requireNotApplicable(t, ok, "the store keeps no trees")
	return tr
}

// setTree opts prefix into a tree, failing the test on error.
func (e *env) setTree(prefix string) {
	e.t.Helper()
	tr := requireTrees(e.t, e.store)
	got, err := tr.SetTree(e.ctx, &store.SetTreeParams{Prefix: prefix, Actor: "test"})
	if err != nil {
		e.t.Fatalf("SetTree(%q): %v", prefix, err)
	}
	if got.Prefix != prefix || got.Root != store.TreeRoot(prefix) {
		e.t.Fatalf("SetTree(%q) = %+v", prefix, got)
	}
}

var treeLeaseSeq atomic.Int64

// grab asks the store once (no waiting) for key in the given mode, with resources, as holder.
func (e *env) grab(key string, shared bool, holder string, resources ...string) (*store.Lease, error) {
	id := fmt.Sprintf("tree-%d", treeLeaseSeq.Add(1))
	return e.store.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: holder, TTL: time.Minute,
		Shared: shared, Resources: resources})
}

func (e *env) drop(l *store.Lease) {
	e.t.Helper()
	if _, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID, Holds: l.Shared || len(l.Resources) > 0}); err != nil {
		e.t.Fatalf("Release(%q): %v", l.Key, err)
	}
}

func modeName(shared bool) string {
	if shared {
		return "S"
	}
	return "X"
}

// testTreeMatrix walks the whole compatibility matrix: for a requested key K = <root>/a/b and a
// held key in every relation to it (the root and the parent: ancestors; K; a child and a
// grandchild: descendants; a sibling, a cousin, and the keys that sort right around K's
// descendants: "b-x", "bb", "b0"), each mode held against each mode requested, asked for as the
// request's key and as one of its resources (the multi-key grant), it checks the grant against
// store.TreeCompatible, that a refusal names the related key and its holder, and that the
// request is granted once the holder released. Keys in no tree are unrelated whatever their
// slashes: outside a tree, a key other than K is asked for in the exclusive mode against an
// exclusive holder only, the one pair that every relation but "unrelated" refuses (so a store
// that relates keys outside a tree is caught there); the other modes of unrelated keys are
// walked inside the tree (sibling, cousin and the keys sorting around K's descendants).
func testTreeMatrix(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireTrees(t, e.store)
	requireLimits(t, e)
	rels := []struct {
		name, held string
		rel        store.Relation
	}{
		{"root", "", store.Ancestor}, {"parent", "/a", store.Ancestor}, {"self", "/a/b", store.Same},
		{"child", "/a/b/x", store.Descendant}, {"grandchild", "/a/b/x/y", store.Descendant},
		{"sibling", "/a/c", store.Unrelated}, {"cousin", "/d/b", store.Unrelated}, {"sibling-dash", "/a/b-x", store.Unrelated},
		{"sibling-longer", "/a/bb", store.Unrelated}, {"sibling-zero", "/a/b0", store.Unrelated},
	}
	n := 0
	for _, inTree := range []bool{true, false} {
		for _, r := range rels {
			for _, heldShared := range []bool{false, true} {
				for _, wantShared := range []bool{false, true} {
					for _, asResource := range []bool{false, true} {
						if !inTree && r.rel != store.Same && (heldShared || wantShared) {
							continue
						}
						n++
						root := fmt.Sprintf("m%d", n)
						prefix := root + "/"
						rel := r.rel
						if inTree {
							e.setTree(prefix)
						} else if rel != store.Same {
							rel = store.Unrelated
						}
						heldKey, want := root+r.held, root+"/a/b"
						name := fmt.Sprintf("tree=%v held %s %s, requested %s (as a resource: %v)", inTree, modeName(heldShared), r.name,
							modeName(wantShared), asResource)
						h, err := e.grab(heldKey, heldShared, "holder-"+root)
						if err != nil {
							t.Fatalf("%s: the holder: %v", name, err)
						}
						ask := func() (*store.Lease, error) {
							if asResource {
								return e.grab("other/"+root, wantShared, "asker-"+root, want)
							}
							return e.grab(want, wantShared, "asker-"+root)
						}
						l, err := ask()
						if ok := store.TreeCompatible(rel, heldShared, wantShared); ok {
							if err != nil {
								t.Fatalf("%s: %v; want granted", name, err)
							}
							e.drop(l)
							e.drop(h)
							continue
						}
						var held *store.LockHeldError
						if !errors.As(err, &held) {
							t.Fatalf("%s: %v; want refused with *LockHeldError", name, err)
						}
						if held.Holder != h.Holder || held.Token != h.Token || held.ExpiresAt.IsZero() {
							t.Fatalf("%s: refusal %+v; want the holder %q, token %d and its expiry", name, held, h.Holder, h.Token)
						}
						wantRelated := ""
						if rel != store.Same {
							wantRelated = h.Key
						}
						if held.Related != wantRelated {
							t.Fatalf("%s: refusal %+v names related key %q; want %q", name, held, held.Related, wantRelated)
						}
						e.drop(h)
						if l, err = ask(); err != nil {
							t.Fatalf("%s: after the holder released: %v", name, err)
						}
						e.drop(l)
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}

// treeHolding checks holdings of one tree: two that overlap in time on related keys must both be
// shared. It returns how many overlapping pairs were on unrelated keys with one exclusive (the
// tree did not serialise siblings) and on related keys, both shared.
func checkTree(t *testing.T, all []*holding, prefix string) (siblings, sharedRelated int) {
	t.Helper()
	for i, a := range all {
		for _, b := range all[i+1:] {
			if !(a.start.Before(b.end) && b.start.Before(a.end)) {
				continue
			}
			rel := store.Relate(a.keys[0], b.keys[0], prefix)
			switch {
			case rel == store.Unrelated:
				if !a.shared || !b.shared {
					siblings++
				}
			case !a.shared || !b.shared:
				t.Fatalf("%s holding of %q (token %d) overlapped %s holding of %q (token %d): %v keys", mode(a), a.keys[0], a.token,
					mode(b), b.keys[0], b.token, rel)
			default:
				sharedRelated++
			}
		}
	}
	return siblings, sharedRelated
}

// testTreeConcurrent: 16 goroutines hold random keys of one tree (its root, parents, children,
// grandchildren, and "cc/a-x", which sorts among the descendants of "cc/a" without being one), in
// random modes, waiting for each other: no two holdings on related keys overlap unless both are
// shared, unrelated keys are held at once, and so are related keys in shared mode.
func testTreeConcurrent(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireTrees(t, e.store)
	requireLimits(t, e)
	e.setTree("cc/")
	keys := []string{"cc", "cc/a", "cc/b", "cc/a/x", "cc/a/y", "cc/b/x", "cc/a/x/1", "cc/a/x/2", "cc/a-x", "cc/b/y"}
	// Long enough beside a grant for others to be granted meanwhile, on a loaded machine and
	// under the race detector (with 1 ms, unrelated keys were seen together only by chance).
	e.holdFor = 20 * time.Millisecond
	var hs holdings
	e.run(16, 12, &hs, func(g, i int) error {
		// The root and the parents less often, so that children have time to run together.
		k := keys[3+rand.IntN(len(keys)-3)]
		if rand.IntN(5) == 0 {
			k = keys[rand.IntN(3)]
		}
		return e.hold(&hs, k, rand.IntN(2) == 0, nil, nil)
	})
	siblings, shared := checkTree(t, hs.all, "cc/")
	checkTokenOrder(t, hs.all)
	if siblings == 0 {
		t.Fatalf("no two holdings of unrelated keys overlapped in %d: the tree serialised everything", len(hs.all))
	}
	t.Logf("%d holdings; overlaps: %d unrelated, %d related and shared", len(hs.all), siblings, shared)
}

// waitTickets waits until key's line holds at least n tickets (the waiters were refused and
// queued), reading it through store.LineReader.
func (e *env) waitTickets(key string, n int) {
	e.t.Helper()
	lr, ok := e.store.(store.LineReader)
	requireNotApplicable(e.t, ok && e.store.Capabilities().Line, "the store keeps no line")
	deadline := time.Now().Add(30 * time.Second)
	for {
		view, err := lr.ResourceLine(e.ctx, key, 10)
		if err != nil {
			e.t.Fatalf("ResourceLine(%q): %v", key, err)
		}
		if len(view.Tickets) >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("line of %q: %d tickets after 30 s; want %d", key, len(view.Tickets), n)
		}
		time.Sleep(5 * time.Millisecond) // a poll of a condition, bounded above
	}
}

// waiter acquires key in the background (waiting) and sends the lease, or nil on error.
func (e *env) waiter(key string, opts ...baton.Option) <-chan *baton.Lease {
	out := make(chan *baton.Lease, 1)
	go func() {
		l, err := e.locker.Acquire(e.ctx, key, opts...)
		if err != nil {
			e.t.Errorf("Acquire(%q): %v", key, err)
		}
		out <- l
	}()
	return out
}

func (e *env) granted(key string, c <-chan *baton.Lease) *baton.Lease {
	e.t.Helper()
	select {
	case l := <-c:
		if l == nil {
			e.t.FailNow()
		}
		return l
	case <-time.After(30 * time.Second):
		e.t.Fatalf("%q not granted within 30 s", key)
		return nil
	}
}

func (e *env) notGranted(key string, c <-chan *baton.Lease, why string) {
	e.t.Helper()
	select {
	case l := <-c:
		e.t.Fatalf("%q granted (token %d) while %s", key, l.Token, why)
	default:
	}
}

// testTreeFIFO: the line of a parent and the lines of its children do not starve each other;
// arrival decides.
//   - An exclusive parent request that waits for a child's holder is not overtaken by a later
//     request for another, free child: the parent goes first.
//   - A child request that waits for a shared parent holder is not overtaken by a later
//     exclusive request for the root, nor by a later shared request for the parent (which its
//     holder alone would let in): the child goes first.
func testTreeFIFO(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireTrees(t, e.store)
	requireLimits(t, e)
	e.setTree("fa/")
	e.setTree("fb/")

	c1 := e.acquire("fa/n/1")
	parent := e.waiter("fa/n")
	e.waitTickets("fa/n", 1)
	child := e.waiter("fa/n/2")
	e.waitTickets("fa/n/2", 1)
	_, err := e.locker.TryAcquire(e.ctx, "fa/n/3")
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Ahead < 1 || held.Related != "fa/n" {
		t.Fatalf("a free child while an exclusive parent request waits: %v; want refused, the parent's ticket ahead", err)
	}
	e.notGranted("fa/n/2", child, "an exclusive request for its parent arrived first")
	if err := c1.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	p := e.granted("fa/n", parent)
	e.notGranted("fa/n/2", child, "its parent is held")
	if err := p.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	c2 := e.granted("fa/n/2", child)
	if c2.Token <= p.Token {
		t.Fatalf("child's token %d not greater than its parent's %d, granted before it", c2.Token, p.Token)
	}
	_ = c2.Release(e.ctx)

	p1 := e.acquire("fb/n", baton.WithShared())
	child = e.waiter("fb/n/1")
	e.waitTickets("fb/n/1", 1)
	root := e.waiter("fb")
	e.waitTickets("fb", 1)
	if _, err := e.locker.TryAcquire(e.ctx, "fb/n", baton.WithShared()); !errors.As(err, &held) || held.Ahead < 1 {
		t.Fatalf("a shared parent request behind an exclusive child ticket: %v; want refused, the child's ticket ahead", err)
	}
	e.notGranted("fb", root, "a shared holder holds below it")
	if err := p1.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	c := e.granted("fb/n/1", child)
	e.notGranted("fb", root, "the child that arrived first holds")
	if err := c.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := e.granted("fb", root)
	if r.Token <= c.Token {
		t.Fatalf("root's token %d not greater than the child's %d", r.Token, c.Token)
	}
	_ = r.Release(e.ctx)
}

// testTreeWake: with a one-minute poll and an hour's TTL (a waiter retries at least every third of
// it, to keep its ticket), only a push wakes a waiter in time: the release of a child wakes a
// waiting parent request, the release of a parent wakes a waiting grandchild request, and a tree
// lease renews like any other (same token, later expiry).
func testTreeWake(t *testing.T, h Harness) {
	e := newEnv(t, h, &baton.Config{PollInterval: time.Minute})
	requireTrees(t, e.store)
	e.setTree("w/")
	child := e.acquire("w/a/b")
	before := child.ExpiresAt()
	l, err := e.store.Renew(e.ctx, &store.RenewParams{Key: "w/a/b", LeaseID: child.ID, TTL: time.Hour})
	if err != nil || l.Token != child.Token || !l.ExpiresAt.After(before) {
		t.Fatalf("Renew of a tree lease: %+v, %v; want token %d and an expiry after %s", l, err, child.Token, before)
	}
	parent := e.waiter("w/a", baton.WithTTL(time.Hour))
	e.waitTickets("w/a", 1)
	start := time.Now()
	if err := child.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	p := e.granted("w/a", parent)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("parent granted %s after its child was released: no push", d)
	}
	grand := e.waiter("w/a/b/c", baton.WithTTL(time.Hour))
	e.waitTickets("w/a/b/c", 1)
	start = time.Now()
	if err := p.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	g := e.granted("w/a/b/c", grand)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("grandchild granted %s after its grandparent was released: no push", d)
	}
	_ = g.Release(e.ctx)
}

// testTreeRest: an ancestor's lock-delay (its holder expired) refuses a child as its holder did,
// and a descendant's refuses its parent; a clean release's cooldown stays the key's own.
func testTreeRest(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireTrees(t, e.store)
	e.setTree("r/")
	e.setTree("rs/")
	const ttl, delay = time.Second, time.Hour
	for _, c := range []struct{ held, asked string }{{"r/p", "r/p/c"}, {"r/q/c", "r/q"}} {
		l, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: c.held, LeaseID: "crashed-" + c.held, Holder: "crashed", TTL: ttl, LockDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := e.grab(c.asked, false, "next")
			if errors.Is(err, store.ErrResting) {
				break
			}
			var held *store.LockHeldError
			if !errors.As(err, &held) || held.Related != c.held || held.Token != l.Token {
				t.Fatalf("%q while related %q is held: %v; want refused by it", c.asked, c.held, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q still refused as held 30 s after its related holder's TTL of %s", c.asked, ttl)
			}
			time.Sleep(20 * time.Millisecond) // a poll of a condition, bounded above
		}
	}
	// A cooldown after a clean release rests the key alone.
	l, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "rs/s", LeaseID: "cool", Holder: "cool", TTL: time.Minute, Cooldown: delay})
	if err != nil {
		t.Fatal(err)
	}
	e.drop(l)
	if _, err := e.grab("rs/s", false, "next"); !errors.Is(err, store.ErrResting) {
		t.Fatalf("the key itself during its cooldown: %v; want ErrResting", err)
	}
	for _, k := range []string{"rs/s/child", "rs"} {
		l, err := e.grab(k, false, "next")
		if err != nil {
			t.Fatalf("%q beside a cooling related key: %v; want granted", k, err)
		}
		e.drop(l)
	}
}

// testTreeValidation: a bad prefix, an overlapping one, and a key with an empty level or too deep
// under a tree are invalid arguments naming their field; a key outside every tree may hold "//".
func testTreeValidation(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	tr := requireTrees(t, e.store)
	requireLimits(t, e)
	invalidField := func(what string, err error, field string) {
		t.Helper()
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != field {
			t.Fatalf("%s: %v; want an invalid argument naming %q", what, err, field)
		}
	}
	for _, p := range []string{"", "v", "/", "v//", "/v/", "v\x01/"} {
		_, err := tr.SetTree(e.ctx, &store.SetTreeParams{Prefix: p, Actor: "test"})
		invalidField(fmt.Sprintf("SetTree(%q)", p), err, "prefix")
	}
	e.setTree("v/")
	e.setTree("v/") // again: no change
	_, err := tr.SetTree(e.ctx, &store.SetTreeParams{Prefix: "v/a/", Actor: "test"})
	invalidField("SetTree of a prefix inside a tree", err, "prefix")
	e.setTree("w/")
	e.setTree("x/y/")
	_, err = tr.SetTree(e.ctx, &store.SetTreeParams{Prefix: "x/", Actor: "test"})
	invalidField("SetTree of a prefix around a tree", err, "prefix")
	deep := "v" + strings.Repeat("/l", store.MaxTreeDepth)
	for _, k := range []string{"v/", "v//a", "v/a/", "v/a//b", deep + "/l"} {
		_, err := e.grab(k, false, "h")
		invalidField(fmt.Sprintf("Acquire(%q)", k), err, "key")
		_, err = e.grab(k, true, "h")
		invalidField(fmt.Sprintf("shared Acquire(%q)", k), err, "key")
		_, err = e.grab("flat/key", false, "h", k)
		invalidField(fmt.Sprintf("Acquire with resource %q", k), err, "resources")
	}
	for _, k := range []string{deep, "v", "vv//a", "u//a/"} {
		l, err := e.grab(k, false, "h")
		if err != nil {
			t.Fatalf("Acquire(%q): %v", k, err)
		}
		e.drop(l)
	}
	ts, err := tr.Trees(e.ctx, &store.TreesParams{})
	if err != nil || len(ts) != 3 || ts[0].Prefix != "v/" || ts[1].Prefix != "w/" || ts[2].Prefix != "x/y/" || ts[0].SetAt.IsZero() {
		t.Fatalf("Trees: %+v, %v", ts, err)
	}
	if ts, err := tr.Trees(e.ctx, &store.TreesParams{After: "v/", Limit: 1}); err != nil || len(ts) != 1 || ts[0].Prefix != "w/" {
		t.Fatalf("Trees after v/: %+v, %v", ts, err)
	}
	if err := tr.DeleteTree(e.ctx, &store.DeleteTreeParams{Prefix: "nope/", Actor: "test"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteTree of no tree: %v; want ErrNotFound", err)
	}
}

// testTreeInUse: a tree is set and deleted only while nothing under it lives: a lease on its
// root or below, a shared hold, or a waiting ticket refuse both with *TreeInUseError naming the
// key; the keys return to the rules of flat keys once it is deleted. Both changes are audited.
func testTreeInUse(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	tr := requireTrees(t, e.store)
	requireLimits(t, e)
	inUse := func(what string, err error, key string) {
		t.Helper()
		var use *store.TreeInUseError
		if !errors.As(err, &use) || !errors.Is(err, store.ErrTreeInUse) || use.Key != key || use.Prefix != "u/" {
			t.Fatalf("%s: %v; want *TreeInUseError on %q", what, err, key)
		}
	}
	set := func() error {
		_, err := tr.SetTree(e.ctx, &store.SetTreeParams{Prefix: "u/", Actor: "admin-1"})
		return err
	}
	del := func() error { return tr.DeleteTree(e.ctx, &store.DeleteTreeParams{Prefix: "u/", Actor: "admin-2"}) }
	for _, k := range []string{"u", "u/a/b"} {
		l := e.acquire(k)
		inUse("SetTree beside a lease on "+k, set(), k)
		if err := l.Release(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := e.grab("u/s", true, "reader")
	if err != nil {
		t.Fatal(err)
	}
	inUse("SetTree beside a shared hold", set(), "u/s")
	e.drop(s)
	// Flat keys: a holder of u/a does not hold u/a/b.
	a, err := e.grab("u/a", false, "flat")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := e.grab("u/a/b", false, "flat"); err != nil {
		t.Fatalf("a flat key beside its flat 'parent': %v", err)
	} else {
		e.drop(b)
	}
	// A waiting ticket, on a store whose waiters can leave the line.
	ll, leaves := e.store.(store.LineWaiter)
	if leaves {
		if _, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "u/a", LeaseID: "queued", Holder: "queued", TTL: time.Minute, Wait: true}); !errors.Is(err, store.ErrLockHeld) {
			t.Fatal(err)
		}
	}
	e.drop(a)
	if leaves {
		inUse("SetTree beside a waiting ticket", set(), "u/a")
		if err := ll.LeaveLine(e.ctx, "u/a", "queued", ""); err != nil {
			t.Fatal(err)
		}
	}
	if js, ok := e.store.(store.JobStore); ok {
		// An unfinished job that names a key of the tree among its extra resources.
		if err := js.RegisterKinds(e.ctx, []store.Kind{{Name: "wide"}}); err != nil {
			t.Fatal(err)
		}
		res, err := js.SubmitJob(e.ctx, &store.SubmitParams{Kind: "wide", Resource: "flat-side", Resources: []string{"u/x"}})
		if err != nil {
			t.Fatal(err)
		}
		inUse("SetTree beside an unfinished job on it", set(), "u/x")
		if _, err := js.CancelJob(e.ctx, res.Job.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := set(); err != nil {
		t.Fatalf("SetTree once nothing lives under it: %v", err)
	}
	// Now u/a holds its subtree.
	a, err = e.grab("u/a", false, "tree")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.grab("u/a/b", false, "tree"); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("a child of a held key in a tree: %v; want ErrLockHeld", err)
	}
	inUse("DeleteTree beside a lease", del(), "u/a")
	e.drop(a)
	if err := del(); err != nil {
		t.Fatalf("DeleteTree once nothing lives under it: %v", err)
	}
	if ts, err := tr.Trees(e.ctx, &store.TreesParams{}); err != nil || len(ts) != 0 {
		t.Fatalf("Trees after the delete: %+v, %v", ts, err)
	}
	if !e.store.Capabilities().Audit {
		return
	}
	evs, err := e.store.Events(e.ctx, &store.EventsParams{Key: "u/", Limit: 10})
	if err != nil || len(evs) != 2 || evs[0].Kind != store.EventTreeSet || evs[0].Actor != "admin-1" ||
		evs[1].Kind != store.EventTreeDelete || evs[1].Actor != "admin-2" {
		t.Fatalf("audit log of the tree: %v, %v; want tree_set by admin-1 then tree_delete by admin-2", showEvents(evs), err)
	}
}

func showEvents(evs []*store.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "[%s %s %s] ", ev.Kind, ev.Key, ev.Actor)
	}
	return b.String()
}

// testTreeSetByAnotherStore: a tree that another store (another process) set binds this one at
// once, though it opened before: its grants of the tree's keys follow the tree's rules, and a bad
// key of the tree is refused. And once the other store deletes the tree, flat rules again.
func testTreeSetByAnotherStore(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	mine, other := b.Open(t), b.Open(t)
	requireTrees(t, mine)
	ctx := t.Context()
	if _, err := mine.Acquire(ctx, &store.AcquireParams{Key: "warm/up", LeaseID: "warm", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	tr := requireTrees(t, other)
	if _, err := tr.SetTree(ctx, &store.SetTreeParams{Prefix: "o/", Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	parent, err := other.Acquire(ctx, &store.AcquireParams{Key: "o/a", LeaseID: "parent", Holder: "other", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mine.Acquire(ctx, &store.AcquireParams{Key: "o/a/b", LeaseID: "child", Holder: "mine", TTL: time.Minute})
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Related != "o/a" || held.Token != parent.Token {
		t.Fatalf("a child of a key held in a tree set by another store: %v; want refused by o/a", err)
	}
	_, err = mine.Acquire(ctx, &store.AcquireParams{Key: "o//b", LeaseID: "bad", Holder: "mine", TTL: time.Minute})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "key" {
		t.Fatalf("a key with an empty level in a tree set by another store: %v; want an invalid argument naming key", err)
	}
	if _, err := other.Release(ctx, &store.ReleaseParams{Key: "o/a", LeaseID: "parent"}); err != nil {
		t.Fatal(err)
	}
	child, err := mine.Acquire(ctx, &store.AcquireParams{Key: "o/a/b", LeaseID: "child", Holder: "mine", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Release(ctx, &store.ReleaseParams{Key: child.Key, LeaseID: child.ID}); err != nil {
		t.Fatal(err)
	}
	if err := tr.DeleteTree(ctx, &store.DeleteTreeParams{Prefix: "o/", Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"o/a", "o/a/b", "o//b"} {
		if _, err := mine.Acquire(ctx, &store.AcquireParams{Key: k, LeaseID: "flat-" + k, Holder: "mine", TTL: time.Minute}); err != nil {
			t.Fatalf("%q once the tree was deleted by another store: %v; want granted as a flat key", k, err)
		}
	}
}
