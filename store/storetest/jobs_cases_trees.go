package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Jobs in trees (store/trees.go): a job on a tree key holds it by the tree's rules, as a lease
// does. An upgrade of a cluster does not run beside a remediation of one of its nodes; two node
// remediations run together; arrival decides between the lines of a parent and its children.

// treeKinds: upgrade and remediate are exclusive, inspect is shared by its kind.
var treeKinds = []store.Kind{{Name: "upgrade"}, {Name: "remediate"}, {Name: "inspect", Mode: store.ModeShared}}

var treeKindNames = []string{"upgrade", "remediate", "inspect"}

// treeJobStore returns the job store's lease side as a store.Treer with prefix set as a tree,
// or skips the test.
func treeJobStore(t *testing.T, e *jobEnv, prefix string) store.Store {
	t.Helper()
	ls := resourceStore(t, e)
	tr := requireTrees(t, ls)
	if _, err := tr.SetTree(e.ctx, &store.SetTreeParams{Prefix: prefix, Actor: "test"}); err != nil {
		t.Fatalf("SetTree(%q): %v", prefix, err)
	}
	return ls
}

func (e *jobEnv) claimedIDs(want ...*store.Job) []*store.Job {
	e.t.Helper()
	got := e.claim(10, treeKindNames...)
	var gotIDs, wantIDs []int64
	for _, j := range got {
		gotIDs = append(gotIDs, j.ID)
		if !j.Tree {
			e.t.Fatalf("claimed job %d on %q does not say it is in a tree", j.ID, j.Resource)
		}
	}
	for _, j := range want {
		wantIDs = append(wantIDs, j.ID)
	}
	slices.Sort(gotIDs)
	slices.Sort(wantIDs)
	if !slices.Equal(gotIDs, wantIDs) {
		e.t.Fatalf("claimed %v; want %v", gotIDs, wantIDs)
	}
	return got
}

// testJobTreeOrder walks the line of a cluster and its nodes step by step:
//   - an upgrade of the cluster submitted first runs alone; the node remediations submitted after
//     it wait for it, and so does a lease on a node (refused, naming the upgrade's job and the
//     cluster);
//   - then the two remediations of sibling nodes run together; an upgrade submitted meanwhile
//     waits for both; a remediation submitted after that upgrade waits for it, although its own
//     node is free;
//   - a shared inspection of the cluster runs beside a shared lease of a node, not beside an
//     exclusive one.
func testJobTreeOrder(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, treeKinds...)
	ls := treeJobStore(t, e, "cl/")
	up := e.submit(store.SubmitParams{Kind: "upgrade", Resource: "cl/eu-1"})
	ra := e.submit(store.SubmitParams{Kind: "remediate", Resource: "cl/eu-1/node/a"})
	rb := e.submit(store.SubmitParams{Kind: "remediate", Resource: "cl/eu-1/node/b"})
	other := e.submit(store.SubmitParams{Kind: "remediate", Resource: "cl/eu-2/node/a"})
	first := e.claimedIDs(up, other)
	_, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "cl/eu-1/node/c", LeaseID: "l1", Holder: "h", TTL: time.Minute})
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Holder != store.JobHolder(up.ID) || held.Related != "cl/eu-1" || held.Token != first[0].Token && held.Token != first[1].Token {
		t.Fatalf("a lease on a node of a cluster being upgraded: %v; want refused by job %d on cl/eu-1", err, up.ID)
	}
	e.claimNone("the upgrade of their cluster runs", treeKindNames...)
	for _, j := range first {
		e.complete(j)
	}
	nodes := e.claimedIDs(ra, rb)
	up2 := e.submit(store.SubmitParams{Kind: "upgrade", Resource: "cl/eu-1"})
	rc := e.submit(store.SubmitParams{Kind: "remediate", Resource: "cl/eu-1/node/c"})
	e.claimNone("the upgrade waits for the nodes, the later remediation for the upgrade", treeKindNames...)
	e.complete(nodes[0])
	e.claimNone("one node still runs", treeKindNames...)
	e.complete(nodes[1])
	u := e.claimedIDs(up2)
	e.claimNone("the upgrade runs", treeKindNames...)
	e.complete(u[0])
	c := e.claimedIDs(rc)
	e.complete(c[0])

	insp := e.submit(store.SubmitParams{Kind: "inspect", Resource: "cl/eu-3"})
	in := e.claimedIDs(insp)
	r, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "cl/eu-3/node/a", LeaseID: "reader", Holder: "reader", TTL: time.Minute, Shared: true})
	if err != nil {
		t.Fatalf("a shared lease below a shared job: %v", err)
	}
	if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: r.Key, LeaseID: r.ID, Holds: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "cl/eu-3/node/a", LeaseID: "writer", Holder: "writer", TTL: time.Minute}); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("an exclusive lease below a shared job: %v; want ErrLockHeld", err)
	}
	e.complete(in[0])
	for _, j := range []*store.Job{up, ra, rb, other, up2, rc, insp} {
		e.expectState(j.ID, store.JobSucceeded)
	}
}

// testJobTreeSharedLeaseWaits: a shared lease on a node waits for an exclusive job on its
// cluster, and is granted once the job ended; a job on the node submitted meanwhile waits for
// the lease.
func testJobTreeSharedLeaseWaits(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, treeKinds...)
	ls := treeJobStore(t, e, "cs/")
	up := e.submit(store.SubmitParams{Kind: "upgrade", Resource: "cs/eu-1"})
	run := e.claimedIDs(up)
	p := &store.AcquireParams{Key: "cs/eu-1/node/a", LeaseID: "reader", Holder: "reader", TTL: time.Minute, Shared: true, Wait: true}
	_, err := ls.Acquire(e.ctx, p)
	var held *store.LockHeldError
	if !errors.As(err, &held) || held.Holder != store.JobHolder(up.ID) || held.Related != "cs/eu-1" {
		t.Fatalf("a shared lease below an exclusive job: %v; want refused by job %d on cs/eu-1", err, up.ID)
	}
	rem := e.submit(store.SubmitParams{Kind: "remediate", Resource: "cs/eu-1/node/a"})
	e.complete(run[0])
	e.claimNone("the shared lease request arrived before the remediation", treeKindNames...)
	l, err := ls.Acquire(e.ctx, p)
	if err != nil {
		t.Fatalf("the shared lease once the job ended: %v", err)
	}
	if l.Token <= run[0].Token {
		t.Fatalf("lease token %d not greater than the job's %d", l.Token, run[0].Token)
	}
	e.claimNone("the shared lease holds the node", treeKindNames...)
	if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID, Holds: true}); err != nil {
		t.Fatal(err)
	}
	r := e.claimedIDs(rem)
	e.complete(r[0])
}

// testJobTreeConcurrent: workers claim jobs on a cluster, its zones and their nodes, in random
// order and kinds, while lockers hold leases on the same keys: from the recorded runs, no two
// holders of related keys overlapped unless both were shared, and jobs on unrelated nodes ran
// together.
func testJobTreeConcurrent(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, treeKinds...)
	ls := treeJobStore(t, e, "cj/")
	keys := []string{"cj", "cj/z1", "cj/z2", "cj/z1/n1", "cj/z1/n2", "cj/z2/n1", "cj/z2/n2", "cj/z1/n1/d"}
	const jobs, workers, lockers, locksEach, hold = 40, 4, 3, 8, 20 * time.Millisecond
	total := int64(0)
	for i := range jobs {
		k := keys[3+rand.IntN(len(keys)-3)]
		if i%10 == 0 {
			k = keys[rand.IntN(3)]
		}
		kind := treeKindNames[rand.IntN(3)]
		e.submit(store.SubmitParams{Kind: kind, Resource: k})
		total++
	}
	var mu sync.Mutex
	var all []*holding
	record := func(x *holding) {
		mu.Lock()
		all = append(all, x)
		mu.Unlock()
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers+lockers)
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprintf("worker-%d", w)
			for done.Load() < total && e.ctx.Err() == nil {
				js, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: worker, Kinds: treeKindNames, Limit: 1, TTL: time.Minute})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				if len(js) == 0 {
					time.Sleep(5 * time.Millisecond) // pacing the polls, not synchronisation
					continue
				}
				j := js[0]
				x := &holding{keys: []string{j.Resource}, shared: j.Shared, token: j.Token, start: time.Now()}
				time.Sleep(hold) // the job's work
				x.end = time.Now()
				if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
					errs <- fmt.Errorf("%s: complete %d: %w", worker, j.ID, err)
					return
				}
				record(x)
				done.Add(1)
			}
		})
	}
	for g := range lockers {
		wg.Go(func() {
			for i := range locksEach {
				k, shared := keys[rand.IntN(len(keys))], rand.IntN(2) == 0
				p := &store.AcquireParams{Key: k, LeaseID: fmt.Sprintf("locker-%d-%d", g, i), Holder: fmt.Sprintf("locker-%d", g),
					TTL: time.Minute, Shared: shared, Wait: true}
				for {
					l, err := ls.Acquire(e.ctx, p)
					if errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting) {
						time.Sleep(5 * time.Millisecond) // the waiter's retry: pacing, not synchronisation
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("locker %d: %w", g, err)
						return
					}
					x := &holding{keys: []string{k}, shared: shared, token: l.Token, start: time.Now()}
					time.Sleep(hold)
					x.end = time.Now()
					if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: k, LeaseID: l.ID, Holds: shared}); err != nil {
						errs <- fmt.Errorf("locker %d: release: %w", g, err)
						return
					}
					record(x)
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := e.ctx.Err(); err != nil {
		t.Fatalf("%d of %d jobs ran before the test's deadline: %v", done.Load(), total, err)
	}
	siblings, shared := checkTree(t, all, "cj/")
	if siblings == 0 {
		t.Fatalf("no two holders of unrelated keys overlapped in %d runs: the tree serialised everything", len(all))
	}
	t.Logf("%d runs and leases; overlaps: %d unrelated, %d related and shared", len(all), siblings, shared)
}

// testJobTreeBadResource: a job on a key with an empty level under a tree is refused, naming
// the resource.
func testJobTreeBadResource(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, treeKinds...)
	treeJobStore(t, e, "cb/")
	for _, r := range []string{"cb/", "cb//a", "cb/a/"} {
		_, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "upgrade", Resource: r})
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != "resource" {
			t.Fatalf("SubmitJob on %q: %v; want an invalid argument naming resource", r, err)
		}
	}
}
