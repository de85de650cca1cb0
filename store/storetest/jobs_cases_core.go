package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

func testJobExclusion(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	stats, err := CheckJobExclusion(e.ctx, e.s, 8, 20, 10)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Completed+stats.Discarded != 200 || stats.Claims != stats.Completed+stats.Failed {
		t.Fatalf("stats %+v: attempts unaccounted for", stats)
	}
	if stats.Failed == 0 {
		t.Fatalf("stats %+v: no attempt failed, the retry path was not exercised", stats)
	}
	t.Logf("%+v", stats)
}

func testJobKinds(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	full := store.Kind{Name: "kind.full", Policy: store.PolicySkip, MaxAttempts: 2, Timeout: 30 * time.Second,
		Cooldown: 5 * time.Second, FromStates: []string{"", "NEW"}, RunningState: "RUNNING",
		SuccessState: "DONE", FailureState: "BROKEN"}
	if err := e.s.RegisterKinds(e.ctx, []store.Kind{{Name: "kind.plain"}, full}); err != nil {
		t.Fatal(err)
	}
	kinds := func() []store.Kind {
		t.Helper()
		ks, err := e.s.Kinds(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	same := func(a, b store.Kind) bool {
		if len(a.FromStates) == 0 && len(b.FromStates) == 0 {
			a.FromStates, b.FromStates = nil, nil
		}
		return reflect.DeepEqual(a, b)
	}
	plain := store.Kind{Name: "kind.plain", Policy: store.PolicyQueue, MaxAttempts: store.DefaultMaxAttempts}
	if got := kinds(); len(got) != 2 || !same(got[0], full) || !same(got[1], plain) {
		t.Fatalf("Kinds = %+v; want, by name, %+v and %+v (defaults applied)", got, full, plain)
	}
	// Replacing one kind leaves the others.
	if err := e.s.RegisterKinds(e.ctx, []store.Kind{{Name: "kind.plain", MaxAttempts: 7}}); err != nil {
		t.Fatal(err)
	}
	plain.MaxAttempts = 7
	if got := kinds(); len(got) != 2 || !same(got[0], full) || !same(got[1], plain) {
		t.Fatalf("Kinds after replacing kind.plain = %+v; want %+v and %+v", got, full, plain)
	}
	// Bad definitions name the field; a batch with one bad kind writes nothing.
	for _, c := range []struct {
		kinds []store.Kind
		field string
	}{
		{[]store.Kind{{Name: "bad kind"}}, "kind"},
		{[]store.Kind{{Name: ""}}, "kind"},
		{[]store.Kind{{Name: "kind.new"}, {Name: "kind.bad", Policy: "sometimes"}}, "policy"},
		{[]store.Kind{{Name: "kind.plain", MaxAttempts: 9}, {Name: "kind.bad", MaxAttempts: -1}}, "max_attempts"},
		{[]store.Kind{{Name: "kind.new"}, {Name: "kind.bad", FromStates: []string{"a\x00b"}}}, "from_states"},
		{[]store.Kind{{Name: "kind.plain", MaxAttempts: 9}, {Name: "kind.bad", Cooldown: -time.Second}}, "cooldown"},
	} {
		err := e.s.RegisterKinds(e.ctx, c.kinds)
		wantInvalid(t, "RegisterKinds with a bad kind", err, c.field)
		if got := kinds(); len(got) != 2 || !same(got[0], full) || !same(got[1], plain) {
			t.Fatalf("Kinds after a refused RegisterKinds(%+v) = %+v; want them unchanged", c.kinds, got)
		}
	}
}

func testJobSubmitGetList(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "list.a"}, store.Kind{Name: "list.b", MaxAttempts: 3}, store.Kind{Name: "list.later"})
	var all []*store.Job
	lastSeq := map[string]int64{}
	for i := range 6 {
		res := []string{"list/r1", "list/r2"}[i%2]
		j := e.submit(store.SubmitParams{Kind: "list.a", Resource: res, Args: mustJSON(map[string]int{"n": i}), Priority: i % 3})
		var args map[string]int
		if err := json.Unmarshal(j.Args, &args); err != nil || args["n"] != i {
			t.Fatalf("job %d args = %s (%v); want {\"n\":%d}", j.ID, j.Args, err, i)
		}
		if j.ID <= 0 || (len(all) > 0 && j.ID <= all[len(all)-1].ID) || j.Kind != "list.a" || j.Resource != res ||
			j.State != store.JobAvailable || j.Attempt != 0 || j.MaxAttempts != store.DefaultMaxAttempts ||
			j.Priority != i%3 || j.CreatedAt.IsZero() || j.ScheduledAt.IsZero() || j.Head != (i < 2) ||
			j.Seq <= lastSeq[res] || j.Token != 0 || len(j.Errors) != 0 || !j.FinishedAt.IsZero() {
			t.Fatalf("submitted %s; want an available job, head only if first on its resource, increasing IDs and seqs", show(j))
		}
		lastSeq[res] = j.Seq
		all = append(all, j)
	}
	for i := range 3 {
		all = append(all, e.sub("list.b", "list/r3"))
		if j := all[len(all)-1]; j.MaxAttempts != 3 || j.Head != (i == 0) {
			t.Fatalf("submitted %s; want the kind's max attempts 3", show(j))
		}
	}
	// Empty args are stored as {}; an explicit max attempts wins over the kind's.
	empty := e.submit(store.SubmitParams{Kind: "list.b", Resource: "list/r4", MaxAttempts: 9})
	var obj map[string]any
	if err := json.Unmarshal(e.get(empty.ID).Args, &obj); err != nil || len(obj) != 0 || empty.MaxAttempts != 9 {
		t.Fatalf("job without args: %s, args %q (%v); want {} and max attempts 9", show(empty), empty.Args, err)
	}
	all = append(all, empty)
	// Delay and an absolute time in the future make a job scheduled; neither is claimable.
	delayed := e.submit(store.SubmitParams{Kind: "list.later", Resource: "list/r5", Delay: time.Hour})
	if delayed.State != store.JobScheduled || !delayed.Head || !near(delayed.ScheduledAt, delayed.CreatedAt.Add(time.Hour)) {
		t.Fatalf("delayed job %s created %s; want scheduled an hour after its creation", show(delayed), delayed.CreatedAt)
	}
	at := e.submit(store.SubmitParams{Kind: "list.later", Resource: "list/r6", ScheduledAt: time.Now().Add(2 * time.Hour)})
	if at.State != store.JobScheduled || !at.ScheduledAt.After(at.CreatedAt.Add(time.Hour)) {
		t.Fatalf("job scheduled in 2h: %s; want scheduled", show(at))
	}
	all = append(all, delayed, at)
	e.claimNone("its only jobs are scheduled in the future", "list.later")
	for _, j := range []*store.Job{delayed, at} {
		if got := e.get(j.ID); got.State != store.JobScheduled {
			t.Fatalf("after a claim: %s; want still scheduled", show(got))
		}
	}

	// GetJob returns what SubmitJob did.
	for _, j := range all[:3] {
		got := e.get(j.ID)
		if got.ID != j.ID || got.Seq != j.Seq || got.Kind != j.Kind || got.Resource != j.Resource ||
			got.State != j.State || got.Head != j.Head || got.Priority != j.Priority || !near(got.CreatedAt, j.CreatedAt) {
			t.Fatalf("GetJob = %s; submitted %s", show(got), show(j))
		}
	}
	_, err := e.s.GetJob(e.ctx, all[len(all)-1].ID+1000)
	wantErr(t, "GetJob of an unknown ID", err, store.ErrNotFound)

	// Filters and paging.
	match := func(f func(*store.Job) bool) []int64 {
		var out []int64
		for _, j := range all {
			if f(j) {
				out = append(out, j.ID)
			}
		}
		return out
	}
	for _, c := range []struct {
		p    store.JobListParams
		want []int64
	}{
		{store.JobListParams{}, match(func(*store.Job) bool { return true })},
		{store.JobListParams{Kind: "list.b"}, match(func(j *store.Job) bool { return j.Kind == "list.b" })},
		{store.JobListParams{Resource: "list/r1"}, match(func(j *store.Job) bool { return j.Resource == "list/r1" })},
		{store.JobListParams{State: store.JobScheduled}, []int64{delayed.ID, at.ID}},
		{store.JobListParams{Kind: "list.a", Resource: "list/r2"}, match(func(j *store.Job) bool { return j.Resource == "list/r2" })},
		{store.JobListParams{Kind: "list.a", State: store.JobScheduled}, nil},
		{store.JobListParams{Limit: 2}, match(func(*store.Job) bool { return true })},
		{store.JobListParams{Kind: "list.a", Limit: 4}, match(func(j *store.Job) bool { return j.Kind == "list.a" })},
		{store.JobListParams{After: all[4].ID}, match(func(j *store.Job) bool { return j.ID > all[4].ID })},
	} {
		got := ids(e.listAll(c.p))
		if !slices.Equal(got, c.want) {
			t.Fatalf("ListJobs(%+v), all pages = %v; want %v", c.p, got, c.want)
		}
	}
	page, err := e.s.ListJobs(e.ctx, &store.JobListParams{Limit: 3})
	if err != nil || len(page) != 3 || page[0].ID != all[0].ID {
		t.Fatalf("first page of 3 = %v, %v", ids(page), err)
	}
	page, err = e.s.ListJobs(e.ctx, &store.JobListParams{Limit: 3, After: page[2].ID})
	if err != nil || len(page) != 3 || page[0].ID != all[3].ID {
		t.Fatalf("second page of 3 = %v, %v; want it to start at job %d", ids(page), err, all[3].ID)
	}
}

func testJobFIFO(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "fifo"}, store.Kind{Name: "fifo.other"})
	a := e.sub("fifo", "fifo/1")
	b := e.sub("fifo", "fifo/1")
	c := e.sub("fifo", "fifo/1")
	d := e.sub("fifo", "fifo/2")
	x := e.sub("fifo", "fifo/3")
	if !a.Head || b.Head || c.Head || !d.Head || !x.Head || !(a.Seq < b.Seq && b.Seq < c.Seq) {
		t.Fatalf("heads after submit: %s, %s, %s, %s, %s; want only the first job of each resource", show(a), show(b), show(c), show(d), show(x))
	}
	e.claimNone("no job of this kind", "fifo.other")
	// One claim returns the heads of several resources, and only them.
	got := e.claim(10, "fifo")
	slices.SortFunc(got, func(p, q *store.Job) int { return int(p.ID - q.ID) })
	if !slices.Equal(ids(got), []int64{a.ID, d.ID, x.ID}) {
		t.Fatalf("ClaimJobs(limit 10) = %v; want the heads %v", ids(got), []int64{a.ID, d.ID, x.ID})
	}
	running := got[0]
	for range 3 {
		e.claimNone("the running head blocks its resource", "fifo")
	}
	if j := e.get(b.ID); j.State != store.JobAvailable || j.Head {
		t.Fatalf("second job while the first runs: %s; want available, not head", show(j))
	}
	if r := e.resource("fifo/1"); r.RunningJob != a.ID || r.Unfinished != 3 {
		t.Fatalf("resource while job %d runs = %+v; want RunningJob %d, 3 unfinished", a.ID, r, a.ID)
	}
	// Each completion promotes the next, in submission order.
	var order []int64
	for _, next := range []*store.Job{b, c} {
		done := e.complete(running)
		if done.State != store.JobSucceeded || done.Head || done.FinishedAt.IsZero() {
			t.Fatalf("completed %s; want succeeded, finished, no longer head", show(done))
		}
		order = append(order, done.ID)
		if j := e.get(next.ID); !j.Head {
			t.Fatalf("after job %d completed: %s; want it promoted to head", done.ID, show(j))
		}
		claimed := e.claimOne(next.ID, "fifo")
		if claimed.Token <= running.Token {
			t.Fatalf("job %d claimed with token %d after job %d's %d on the same resource", claimed.ID, claimed.Token, running.ID, running.Token)
		}
		running = claimed
	}
	order = append(order, e.complete(running).ID)
	if !slices.Equal(order, []int64{a.ID, b.ID, c.ID}) {
		t.Fatalf("completion order %v; want submission order", order)
	}
	e.claimNone("every job of fifo/1 is done and the others run", "fifo")
	if r := e.resource("fifo/1"); r.RunningJob != 0 || r.Unfinished != 0 {
		t.Fatalf("resource after its jobs = %+v; want nothing running or unfinished", r)
	}
}

func testJobPriority(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "prio"})
	low := e.submit(store.SubmitParams{Kind: "prio", Resource: "prio/1", Priority: 5})
	high := e.submit(store.SubmitParams{Kind: "prio", Resource: "prio/2", Priority: 1})
	later := e.submit(store.SubmitParams{Kind: "prio", Resource: "prio/3", Priority: 1})
	// A priority never lets a job overtake the head of its own resource.
	behind := e.submit(store.SubmitParams{Kind: "prio", Resource: "prio/1", Priority: 0})
	for _, want := range []int64{high.ID, later.ID, low.ID} {
		got := e.claim(1, "prio")
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("ClaimJobs(limit 1) = %v; want job %d (priority, then submission order)", ids(got), want)
		}
	}
	e.claimNone("the priority-0 job waits behind the head of prio/1", "prio")
	if j := e.get(behind.ID); j.Head {
		t.Fatalf("%s is head behind a running job", show(j))
	}
}

func testJobTokens(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "tok"})
	a := e.sub("tok", "tok/1")
	b := e.sub("tok", "tok/1")
	var last uint64
	next := func(how string, j *store.Job) {
		t.Helper()
		if j.Token <= last {
			t.Fatalf("%s: token %d, not greater than %d", how, j.Token, last)
		}
		last = j.Token
	}
	j := e.claimOne(a.ID, "tok")
	next("first attempt", j)
	// A claim elsewhere in between must not make the resource's next token smaller.
	e.complete(e.claimOne(e.sub("tok", "tok/2").ID, "tok"))
	if _, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if g := e.get(a.ID); g.Token != j.Token {
		t.Fatalf("heartbeat changed the token from %d to %d", j.Token, g.Token)
	}
	e.fail(j, store.FailParams{Message: "again"})
	j = e.claimOne(a.ID, "tok")
	next("second attempt", j)
	e.complete(j)
	j = e.claimOne(b.ID, "tok")
	next("next job", j)
	e.cancel(j.ID)
	if _, err := e.s.FailJob(e.ctx, &store.FailParams{ID: j.ID, Token: j.Token, Message: "stopped"}); err != nil {
		t.Fatal(err)
	}
	retried := e.retry(b.ID)
	j = e.claimOne(retried.ID, "tok")
	next("retry by hand", j)
}

func testJobSubscribe(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "sub", MaxAttempts: 1})
	wake, cancel := e.s.SubscribeJobs("sub")
	defer cancel()
	drain := func() {
		for {
			select {
			case <-wake:
			default:
				return
			}
		}
	}
	woken := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake-up within 5s after %s", what)
		}
	}
	a := e.sub("sub", "sub/1")
	woken("the submit of a head job")
	b := e.sub("sub", "sub/1")
	j := e.claimOne(a.ID, "sub")
	drain()
	e.complete(j)
	woken("the promotion of the next job")
	j = e.claimOne(b.ID, "sub")
	e.fail(j, store.FailParams{Message: "to the dead letters"})
	drain()
	e.retry(b.ID)
	woken("a retry by hand")
	// Cancelling twice is harmless, and so is a submit nobody listens for.
	cancel()
	cancel()
	e.sub("sub", "sub/2")
}

// testJobCompleteMany checks a ManyCompleter: results aligned with the request, stale attempts
// left out, successors promoted.
func testJobCompleteMany(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "many", SuccessState: "DONE"})
	mc, ok := e.s.(store.ManyCompleter)
	requireNotApplicable(t, ok, "the store does not complete in batches")
	a := e.sub("many", "m/1")
	ja := e.claimOne(a.ID, "many")
	b := e.sub("many", "m/2")
	jb := e.claimOne(b.ID, "many")
	next := e.sub("many", "m/1")
	res, err := mc.CompleteMany(e.ctx, []*store.CompleteParams{
		{ID: ja.ID, Token: ja.Token}, {ID: jb.ID, Token: jb.Token + 1000}, {ID: jb.ID, Token: jb.Token}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0] == nil || res[0].State != store.JobSucceeded || res[1] != nil || res[2] == nil || res[2].ID != b.ID {
		t.Fatalf("CompleteMany = %v; want [a succeeded, nil (stale token), b succeeded]", res)
	}
	if r := e.resource("m/1"); r.State != "DONE" {
		t.Fatalf("resource m/1 = %+v; want DONE", r)
	}
	if g := e.get(next.ID); !g.Head {
		t.Fatalf("the next job on m/1 was not promoted: %s", show(g))
	}
}

// testJobCompleteAndClaim checks a CompleteClaimer: the claim in the completions' round trip
// starts the successor they promoted, stale attempts are left out as by CompleteMany, and bad
// claim parameters are refused before anything is written.
func testJobCompleteAndClaim(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "cc"})
	cc, ok := e.s.(store.CompleteClaimer)
	requireNotApplicable(t, ok, "the store does not complete and claim in one round trip")
	a := e.sub("cc", "cc/1")
	ja := e.claimOne(a.ID, "cc")
	next := e.sub("cc", "cc/1")
	ps := []*store.CompleteParams{{ID: ja.ID, Token: ja.Token}, {ID: ja.ID, Token: ja.Token + 1000}}
	_, _, err := cc.CompleteManyAndClaim(e.ctx, ps, &store.ClaimParams{Worker: "w2", Kinds: []string{"cc"}, Limit: 0, TTL: time.Minute})
	wantInvalid(t, "a claim with limit 0", err, "limit")
	if g := e.get(a.ID); g.State != store.JobRunning {
		t.Fatalf("a refused call completed the job: %s", show(g))
	}
	done, claimed, err := cc.CompleteManyAndClaim(e.ctx, ps, &store.ClaimParams{Worker: "w2", Kinds: []string{"cc"}, Limit: 5, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 || done[0] == nil || done[0].State != store.JobSucceeded || done[1] != nil {
		t.Fatalf("completed = %v; want [a succeeded, nil (stale token)]", done)
	}
	if len(claimed) != 1 || claimed[0].ID != next.ID || claimed[0].State != store.JobRunning ||
		claimed[0].Worker != "w2" || claimed[0].Token <= ja.Token {
		t.Fatalf("claimed = %v; want the next job on cc/1, running for w2 with a newer token", claimed)
	}
	// Nothing to complete: a claim alone.
	if done, claimed, err = cc.CompleteManyAndClaim(e.ctx, nil, &store.ClaimParams{Worker: "w2", Kinds: []string{"cc"}, Limit: 5, TTL: time.Minute}); err != nil || len(done) != 0 || len(claimed) != 0 {
		t.Fatalf("CompleteManyAndClaim(nil) = %v, %v, %v; want nothing", done, claimed, err)
	}
}

// testJobCompleteAndClaimHandsOff checks the claim of a CompleteClaimer round trip when the
// completed jobs have successors (which a store may start with their promotion, as one
// experiment did: docs/benchmarks-history.md): it starts no more jobs than its limit in all, never a
// second job on a resource, a successor of another kind or a guarded kind only through the
// guard, one cooling down not at all, and priority still orders it across resources.
func testJobCompleteAndClaimHandsOff(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "ho"}, store.Kind{Name: "other"},
		store.Kind{Name: "cool", Cooldown: time.Hour}, store.Kind{Name: "guarded", FromStates: []string{"ready"}})
	cc, ok := e.s.(store.CompleteClaimer)
	requireNotApplicable(t, ok, "the store does not complete and claim in one round trip")
	claimFor := func(worker string, limit int, kinds ...string) *store.ClaimParams {
		return &store.ClaimParams{Worker: worker, Kinds: kinds, Limit: limit, TTL: time.Minute}
	}
	// Three resources, each with a running job and a successor; limit 2.
	var running, next []*store.Job
	for i := range 3 {
		a := e.sub("ho", fmt.Sprintf("ho/%d", i))
		running = append(running, e.claimOne(a.ID, "ho"))
		next = append(next, e.sub("ho", fmt.Sprintf("ho/%d", i)))
	}
	ps := make([]*store.CompleteParams, len(running))
	for i, j := range running {
		ps[i] = &store.CompleteParams{ID: j.ID, Token: j.Token}
	}
	done, claimed, err := cc.CompleteManyAndClaim(e.ctx, ps, claimFor("w2", 2, "ho"))
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 || len(claimed) != 2 || claimed[0].ID == claimed[1].ID {
		t.Fatalf("completed %v, claimed %v; want 3 completed and 2 of the successors started", done, ids(claimed))
	}
	started := map[int64]bool{}
	for _, j := range claimed {
		if j.State != store.JobRunning || j.Worker != "w2" || !j.Head || j.Attempt != 1 || j.Token <= running[2].Token {
			t.Fatalf("claimed %s; want a successor running for w2, attempt 1, a newer token", show(j))
		}
		started[j.ID] = true
	}
	for _, n := range next {
		if g := e.get(n.ID); !g.Head || started[n.ID] != (g.State == store.JobRunning) {
			t.Fatalf("successor %s; want head, running only if claimed", show(g))
		}
	}
	// The one left is claimable as usual.
	for _, n := range next {
		if !started[n.ID] {
			e.claimOne(n.ID, "ho")
		}
	}

	// A better priority elsewhere comes first.
	b := e.submit(store.SubmitParams{Kind: "ho", Resource: "pr/1", Priority: 5})
	jb := e.claimOne(b.ID, "ho")
	bNext := e.submit(store.SubmitParams{Kind: "ho", Resource: "pr/1", Priority: 5})
	urgent := e.submit(store.SubmitParams{Kind: "ho", Resource: "pr/2", Priority: 0})
	_, claimed, err = cc.CompleteManyAndClaim(e.ctx, []*store.CompleteParams{{ID: jb.ID, Token: jb.Token}}, claimFor("w2", 1, "ho"))
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != urgent.ID {
		t.Fatalf("claimed %v; want the priority 0 head %d before the priority 5 successor %d", ids(claimed), urgent.ID, bNext.ID)
	}
	e.claimOne(bNext.ID, "ho")

	// Successors of a kind the claim did not ask for, or cooling down, are promoted, not started;
	// a guarded one starts only through its guard.
	c := e.sub("cool", "pr/4")
	jc := e.claimOne(c.ID, "cool")
	coolNext := e.sub("cool", "pr/4")
	o := e.sub("other", "pr/6")
	jo := e.claimOne(o.ID, "other")
	otherNext := e.sub("other", "pr/6")
	if _, err := e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{Key: "pr/5", State: "ready"}); err != nil {
		t.Fatal(err)
	}
	g := e.sub("guarded", "pr/5")
	jg := e.claimOne(g.ID, "guarded")
	guardedNext := e.sub("guarded", "pr/5")
	ps = []*store.CompleteParams{{ID: jc.ID, Token: jc.Token}, {ID: jo.ID, Token: jo.Token}, {ID: jg.ID, Token: jg.Token}}
	if _, claimed, err = cc.CompleteManyAndClaim(e.ctx, ps, claimFor("w3", 5, "cool", "guarded")); err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != guardedNext.ID || claimed[0].State != store.JobRunning {
		t.Fatalf("claimed %v; want only the guarded successor %d, through its guard", ids(claimed), guardedNext.ID)
	}
	for _, n := range []*store.Job{coolNext, otherNext} {
		if g := e.get(n.ID); g.State == store.JobRunning || !g.Head {
			t.Fatalf("successor %s; want promoted, not started", show(g))
		}
	}
}
