package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Latest wins (store.PolicyReplace, store/jobs_replace.go).

// wantSuperseded fails unless job id is superseded by by, finished.
func (e *jobEnv) wantSuperseded(id, by int64) *store.Job {
	e.t.Helper()
	j := e.get(id)
	if j.State != store.JobSuperseded || j.SupersededBy != by || j.FinishedAt.IsZero() || j.Head {
		e.t.Fatalf("job %d = %s, superseded by %d; want superseded by %d, finished, not head", id, show(j), j.SupersededBy, by)
	}
	return j
}

// testJobReplaceQueued: a replace submit supersedes the queued jobs of its kind on its resource,
// and nothing else; an idempotency key of a superseded job answers with its replacement.
func testJobReplaceQueued(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "rp", Policy: store.PolicyReplace}, store.Kind{Name: "rp.other"})
	requireLineRules(t, e)
	a := e.submit(store.SubmitParams{Kind: "rp", Resource: "rp/1", IdempotencyKey: "rp-a"})
	if !a.Head || a.State != store.JobAvailable {
		t.Fatalf("replace submit to a free resource: %s; want an available head", show(a))
	}
	o := e.sub("rp.other", "rp/1")
	b := e.sub("rp", "rp/1")
	elsewhere := e.sub("rp", "rp/2")
	n := e.submit(store.SubmitParams{Kind: "rp", Resource: "rp/1", IdempotencyKey: "rp-n"})
	e.wantSuperseded(a.ID, b.ID)
	e.wantSuperseded(b.ID, n.ID)
	// The other kind's job is untouched and now heads the resource; the new job queues behind it.
	if got := e.get(o.ID); got.State != store.JobAvailable || !got.Head {
		t.Fatalf("job of another kind after a replace: %s; want it untouched, now the head", show(got))
	}
	if got := e.get(n.ID); got.Head || got.State != store.JobAvailable || got.SupersededBy != 0 {
		t.Fatalf("replacing job: %s; want available behind the other kind's job", show(got))
	}
	if got := e.get(elsewhere.ID); got.State != store.JobAvailable || !got.Head {
		t.Fatalf("job of the kind on another resource: %s; want it untouched", show(got))
	}
	if r := e.resource("rp/1"); r.Unfinished != 2 {
		t.Fatalf("resource rp/1 = %+v; want 2 unfinished jobs (the other kind's and the replacement)", r)
	}
	// The key of a superseded job answers with the job that replaced it, through the chain.
	res, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "rp", Resource: "rp/1", IdempotencyKey: "rp-a"})
	if err != nil || !res.Existing || res.Job.ID != n.ID {
		t.Fatalf("submit with the key of a superseded job = %+v, %v; want job %d, existing", res, err, n.ID)
	}
	if got := e.listAll(store.JobListParams{Resource: "rp/1"}); len(got) != 4 {
		t.Fatalf("jobs of rp/1 = %v; want 4: the idempotent submit wrote nothing", ids(got))
	}
	// The queue runs: the other kind's job, then the replacement; the superseded never.
	first := e.claim(10, "rp", "rp.other")
	if slices.SortFunc(first, func(a, b *store.Job) int { return int(a.ID - b.ID) }); !slices.Equal(ids(first), []int64{o.ID, elsewhere.ID}) {
		t.Fatalf("claimed %v; want the heads %d (other kind) and %d (another resource)", ids(first), o.ID, elsewhere.ID)
	}
	for _, j := range first {
		e.complete(j)
	}
	e.complete(e.claimOne(n.ID, "rp", "rp.other"))
	e.claimNone("superseded jobs never run", "rp")
	if _, err := e.s.RetryJob(e.ctx, a.ID); err == nil {
		t.Fatalf("RetryJob of a superseded job succeeded; want a JobStateError")
	}
	if !store.JobSuperseded.Final() || !store.JobSuperseded.Valid() {
		t.Fatal("superseded must be a valid, final state")
	}
	if got := e.listAll(store.JobListParams{State: store.JobSuperseded}); !slices.Equal(ids(got), []int64{a.ID, b.ID}) {
		t.Fatalf("ListJobs(superseded) = %v; want %d and %d", ids(got), a.ID, b.ID)
	}

	// A per-submit replace on a kind of policy queue; a per-submit queue on a replace kind
	// supersedes nothing.
	q1 := e.sub("rp.other", "rp/3")
	q2 := e.sub("rp.other", "rp/3")
	r := e.submit(store.SubmitParams{Kind: "rp.other", Resource: "rp/3", Policy: store.PolicyReplace})
	e.wantSuperseded(q1.ID, r.ID)
	e.wantSuperseded(q2.ID, r.ID)
	if got := e.get(r.ID); !got.Head || got.State != store.JobAvailable {
		t.Fatalf("per-submit replace of a resource's only jobs: %s; want the available head", show(got))
	}
	keep := e.sub("rp", "rp/4")
	plain := e.submit(store.SubmitParams{Kind: "rp", Resource: "rp/4", Policy: store.PolicyQueue})
	if got := e.get(keep.ID); got.State != store.JobAvailable || plain.State != store.JobAvailable {
		t.Fatalf("per-submit queue on a replace kind: %s, then %s; want both queued", show(got), show(plain))
	}

	// SubmitMany: each job as SubmitJob would, in order; a later job supersedes an earlier one.
	out, err := e.s.SubmitMany(e.ctx, []*store.SubmitParams{{Kind: "rp", Resource: "rp/5"}, {Kind: "rp", Resource: "rp/6"},
		{Kind: "rp", Resource: "rp/5"}})
	if err != nil {
		t.Fatal(err)
	}
	e.wantSuperseded(out[0].Job.ID, out[2].Job.ID)
	if got := e.get(out[2].Job.ID); !got.Head || got.State != store.JobAvailable {
		t.Fatalf("batch job that superseded the batch's head: %s; want the available head", show(got))
	}
	if got := e.get(out[1].Job.ID); !got.Head || got.State != store.JobAvailable {
		t.Fatalf("batch job on another resource: %s; want an available head", show(got))
	}
}

// testJobReplaceRunning: a replace asks the running job of its kind to stop; the replacement
// starts only after that attempt ended (reported by its worker, or its lease reaped), with a
// greater token; a job that completes anyway stays succeeded.
func testJobReplaceRunning(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "rr", Policy: store.PolicyReplace})
	requireLineRules(t, e)
	a := e.sub("rr", "rr/1")
	ra := e.claimOne(a.ID, "rr")
	n := e.sub("rr", "rr/1")
	if got := e.get(a.ID); got.State != store.JobRunning || !got.CancelRequested || got.SupersededBy != n.ID || !got.Head {
		t.Fatalf("running job after a replace: %s (superseded by %d); want running, head, asked to stop, by %d",
			show(got), got.SupersededBy, n.ID)
	}
	if n.Head || n.State != store.JobAvailable {
		t.Fatalf("replacement of a running job: %s; want queued behind it", show(n))
	}
	hb, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: ra.ID, Token: ra.Token, TTL: time.Minute})
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat of the replaced attempt = %+v, %v; want CancelRequested", hb, err)
	}
	e.claimNone("the replacement waits for the running attempt to end", "rr")
	// A second replace supersedes the first replacement, and the running job names the newest.
	n2 := e.sub("rr", "rr/1")
	e.wantSuperseded(n.ID, n2.ID)
	if got := e.get(a.ID); got.SupersededBy != n2.ID {
		t.Fatalf("running job after a second replace: superseded by %d; want %d", got.SupersededBy, n2.ID)
	}
	e.claimNone("still running", "rr")
	done := e.fail(ra, store.FailParams{Code: store.CodeCancelled, Message: "replaced"})
	if done.State != store.JobSuperseded || done.SupersededBy != n2.ID || done.FinishedAt.IsZero() {
		t.Fatalf("replaced attempt reported: %s; want superseded by %d", show(done), n2.ID)
	}
	r2 := e.claimOne(n2.ID, "rr")
	if r2.Token <= ra.Token {
		t.Fatalf("replacement's token %d; want greater than the replaced attempt's %d", r2.Token, ra.Token)
	}
	// Completes anyway: succeeded, and the replacement runs after it.
	n3 := e.sub("rr", "rr/1")
	if got := e.complete(r2); got.State != store.JobSucceeded {
		t.Fatalf("a replaced attempt that completes: %s; want succeeded (the work is done)", show(got))
	}
	r3 := e.claimOne(n3.ID, "rr")

	// Lease expiry: the reaper ends the replaced attempt, superseded; then the replacement runs.
	n4 := e.sub("rr", "rr/2")
	at := time.Now()
	r4 := e.claimTTL(time.Second, 10, "rr")
	if len(r4) != 1 || r4[0].ID != n4.ID {
		t.Fatalf("claimed %v; want %d", ids(r4), n4.ID)
	}
	n5 := e.sub("rr", "rr/2")
	var reaped []*store.ReapedJob
	if e.canAdvance() {
		e.advance(time.Second + clockSlack)
		reaped, err = e.s.ReapJobs(e.ctx, &store.ReapParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		e.poll("the reaper ends the replaced attempt's 1s lease", 15*time.Second, func() bool {
			got, err := e.s.ReapJobs(e.ctx, &store.ReapParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			reaped = append(reaped, got...)
			return len(reaped) > 0
		})
		if waited := time.Since(at); waited < time.Second-clockSlack {
			t.Fatalf("a 1s lease was reaped %s after the claim", waited)
		}
	}
	if len(reaped) != 1 || reaped[0].Job.ID != n4.ID || reaped[0].Job.State != store.JobSuperseded || reaped[0].Job.SupersededBy != n5.ID {
		t.Fatalf("reaped %d jobs (%v); want job %d superseded by %d", len(reaped), reaped, n4.ID, n5.ID)
	}
	r5 := e.claimOne(n5.ID, "rr")
	if r5.Token <= r4[0].Token {
		t.Fatalf("replacement's token %d after a reaped attempt's %d; want greater", r5.Token, r4[0].Token)
	}
	e.complete(r5)
	e.complete(r3)
}

// testJobReplaceBadInput: what replace and debounce refuse, with nothing written.
func testJobReplaceBadInput(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "rb.q"}, store.Kind{Name: "rb.skip", Policy: store.PolicySkip},
		store.Kind{Name: "rb.rej", Policy: store.PolicyReject}, store.Kind{Name: "rb.rep", Policy: store.PolicyReplace})
	requireLineRules(t, e)
	for _, c := range []struct {
		name  string
		p     store.SubmitParams
		field string
	}{
		{"debounce with policy queue", store.SubmitParams{Kind: "rb.q", Policy: store.PolicyQueue, Debounce: time.Second}, "debounce"},
		{"debounce with the kind's policy queue", store.SubmitParams{Kind: "rb.q", Debounce: time.Second}, "debounce"},
		{"debounce with policy skip", store.SubmitParams{Kind: "rb.rep", Policy: store.PolicySkip, Debounce: time.Second}, "debounce"},
		{"debounce too short", store.SubmitParams{Kind: "rb.rep", Debounce: time.Millisecond}, "debounce"},
		{"debounce too long", store.SubmitParams{Kind: "rb.rep", Debounce: store.MaxDebounce + time.Second}, "debounce"},
		{"negative debounce", store.SubmitParams{Kind: "rb.rep", Debounce: -time.Second}, "debounce"},
		{"replace on a skip kind", store.SubmitParams{Kind: "rb.skip", Policy: store.PolicyReplace}, "policy"},
		{"replace on a reject kind", store.SubmitParams{Kind: "rb.rej", Policy: store.PolicyReplace}, "policy"},
		{"unknown policy", store.SubmitParams{Kind: "rb.q", Policy: "latest"}, "policy"},
	} {
		c.p.Resource = "rb/1"
		_, err := e.s.SubmitJob(e.ctx, &c.p)
		wantInvalid(t, c.name, err, c.field)
		_, err = e.s.SubmitMany(e.ctx, []*store.SubmitParams{{Kind: "rb.q", Resource: "rb/1"}, &c.p})
		wantInvalid(t, c.name+" (batch)", err, "jobs[1]."+c.field)
	}
	if got := e.listAll(store.JobListParams{}); len(got) != 0 {
		t.Fatalf("jobs after refused submits: %v; want none", ids(got))
	}
	for _, c := range []struct {
		name string
		k    store.Kind
	}{
		{"kind debounce with policy queue", store.Kind{Name: "rb.k1", Debounce: time.Second}},
		{"kind debounce with policy skip", store.Kind{Name: "rb.k2", Policy: store.PolicySkip, Debounce: time.Second}},
		{"kind debounce too short", store.Kind{Name: "rb.k3", Policy: store.PolicyReplace, Debounce: time.Millisecond}},
		{"kind debounce too long", store.Kind{Name: "rb.k4", Policy: store.PolicyReplace, Debounce: 25 * time.Hour}},
	} {
		wantInvalid(t, c.name, e.s.RegisterKinds(e.ctx, []store.Kind{c.k}), "debounce")
	}
	kinds, err := e.s.Kinds(e.ctx)
	if err != nil || len(kinds) != 4 {
		t.Fatalf("Kinds after refused registrations = %v, %v; want the 4 of the test", kinds, err)
	}
	// A kind with a debounce reads back with it.
	if err := e.s.RegisterKinds(e.ctx, []store.Kind{{Name: "rb.deb", Policy: store.PolicyReplace, Debounce: 1500 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	kinds, err = e.s.Kinds(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(kinds, func(k store.Kind) bool { return k.Name == "rb.deb" })
	if i < 0 || kinds[i].Policy != store.PolicyReplace || kinds[i].Debounce != 1500*time.Millisecond {
		t.Fatalf("Kinds = %+v; want rb.deb with policy replace and debounce 1.5s", kinds)
	}
}

// testJobReplaceDebounce: a burst of replace submits with a debounce runs once, the last job,
// a debounce after its submit (on the store's clock).
func testJobReplaceDebounce(t *testing.T, h JobHarness) {
	// With a clock the suite moves, a debounce no load outlasts; else a short one, waited for.
	d := 300 * time.Millisecond
	if h.Advance != nil {
		d = time.Hour
	}
	e := newJobEnv(t, h, store.Kind{Name: "rd", Policy: store.PolicyReplace, Debounce: d}, store.Kind{Name: "rd.q"})
	requireLineRules(t, e)
	var burst []*store.Job
	for range 6 {
		burst = append(burst, e.sub("rd", "rd/1"))
	}
	// Per submit: replace with its own debounce on a kind of policy queue.
	other := e.submit(store.SubmitParams{Kind: "rd.q", Resource: "rd/2", Policy: store.PolicyReplace, Debounce: d})
	last := burst[len(burst)-1]
	for _, j := range append(burst, other) {
		if j.State != store.JobScheduled || j.ScheduledAt.Sub(j.CreatedAt) < d-time.Millisecond {
			t.Fatalf("debounced job: %s; want scheduled %s after its submit (store clock)", show(j), d)
		}
	}
	for i, j := range burst[:len(burst)-1] {
		e.wantSuperseded(j.ID, burst[i+1].ID)
	}
	var got []*store.Job
	if e.canAdvance() {
		e.claimNone("the debounce has not passed", "rd", "rd.q")
		e.advance(d + clockSlack)
		got = e.claim(10, "rd", "rd.q")
	} else {
		e.poll("the debounced jobs become claimable", 15*time.Second, func() bool {
			got = append(got, e.claim(10, "rd", "rd.q")...)
			return len(got) >= 2
		})
	}
	slices.SortFunc(got, func(a, b *store.Job) int { return int(a.ID - b.ID) })
	if !slices.Equal(ids(got), []int64{last.ID, other.ID}) {
		t.Fatalf("claimed %v after the debounce; want only the burst's last job %d and %d", ids(got), last.ID, other.ID)
	}
	for _, j := range got {
		if j.AttemptedAt.Before(j.CreatedAt.Add(d - time.Millisecond)) {
			t.Fatalf("debounced job started at %s, %s after its submit; want at least %s", j.AttemptedAt,
				j.AttemptedAt.Sub(j.CreatedAt), d)
		}
		e.complete(j)
	}
	e.claimNone("the burst ran once", "rd", "rd.q")
}

// testJobReplaceConcurrent: submitters replace jobs on a few resources while workers claim and
// complete (or stop when asked, as a replaced worker should): never two attempts of a resource
// at once, tokens increase per resource, and at the end each resource's newest job ran last and
// succeeded, every other one superseded or succeeded before it.
func testJobReplaceConcurrent(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "rc", Policy: store.PolicyReplace})
	requireLineRules(t, e)
	const resources, submitters, perSubmitter, workers = 3, 8, 15, 4
	var (
		mu      sync.Mutex
		running = map[string]int{}
		tokens  = map[string][]uint64{}
		lastRun = map[string]int64{}
		bad     []string
	)
	failf := func(format string, args ...any) {
		mu.Lock()
		bad = append(bad, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var subs sync.WaitGroup
	for g := range submitters {
		subs.Go(func() {
			for i := range perSubmitter {
				r := fmt.Sprintf("rc/%d", (g+i)%resources)
				if _, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "rc", Resource: r}); err != nil {
					failf("submit: %v", err)
					return
				}
			}
		})
	}
	submitted := make(chan struct{})
	go func() { subs.Wait(); close(submitted) }()
	var work sync.WaitGroup
	for w := range workers {
		work.Go(func() {
			for n := 0; ; n++ {
				mu.Lock()
				failed := len(bad) > 0
				mu.Unlock()
				if failed {
					return
				}
				js, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: fmt.Sprintf("w%d", w), Kinds: []string{"rc"}, Limit: 2, TTL: time.Minute})
				if err != nil {
					failf("claim: %v", err)
					return
				}
				if len(js) == 0 {
					select {
					case <-submitted:
						counts, err := e.s.JobCounts(e.ctx)
						if err != nil {
							failf("counts: %v", err)
							return
						}
						if len(counts) == 0 {
							return
						}
					default:
					}
					time.Sleep(2 * time.Millisecond) // a poll's pause, not a synchronisation
					continue
				}
				for _, j := range js {
					mu.Lock()
					if running[j.Resource] > 0 {
						bad = append(bad, fmt.Sprintf("job %d started on %s while another attempt ran", j.ID, j.Resource))
					}
					running[j.Resource]++
					if ts := tokens[j.Resource]; len(ts) > 0 && ts[len(ts)-1] >= j.Token {
						bad = append(bad, fmt.Sprintf("token %d on %s after %d", j.Token, j.Resource, ts[len(ts)-1]))
					}
					tokens[j.Resource] = append(tokens[j.Resource], j.Token)
					lastRun[j.Resource] = j.ID
					mu.Unlock()
				}
				for i, j := range js {
					hb, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, TTL: time.Minute})
					if err != nil {
						failf("heartbeat %d: %v", j.ID, err)
						return
					}
					mu.Lock()
					running[j.Resource]--
					mu.Unlock()
					if hb.CancelRequested && (n+i)%2 == 0 {
						_, err = e.s.FailJob(e.ctx, &store.FailParams{ID: j.ID, Token: j.Token, Code: store.CodeCancelled})
					} else {
						_, err = e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token})
					}
					if err != nil {
						failf("end %d: %v", j.ID, err)
						return
					}
				}
			}
		})
	}
	work.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d violations, first: %s", len(bad), bad[0])
	}
	all := e.listAll(store.JobListParams{Kind: "rc"})
	if len(all) != submitters*perSubmitter {
		t.Fatalf("%d jobs; want %d", len(all), submitters*perSubmitter)
	}
	newest := map[string]*store.Job{}
	count := map[store.JobState]int{}
	for _, j := range all {
		count[j.State]++
		if n := newest[j.Resource]; n == nil || j.Seq > n.Seq {
			newest[j.Resource] = j
		}
	}
	for r, n := range newest {
		if n.State != store.JobSucceeded || lastRun[r] != n.ID {
			t.Fatalf("resource %s: newest job %s, last run %d; want the newest succeeded, run last", r, show(n), lastRun[r])
		}
	}
	for _, j := range all {
		switch j.State {
		case store.JobSuperseded:
			if j.SupersededBy <= 0 {
				t.Fatalf("superseded job without its replacement: %s", show(j))
			}
		case store.JobSucceeded:
		default:
			t.Fatalf("job %s; want every job superseded or succeeded", show(j))
		}
	}
	t.Logf("%d jobs: %d succeeded, %d superseded", len(all), count[store.JobSucceeded], count[store.JobSuperseded])
}

// requireLineRules skips a case of latest wins or rates on a job store that keeps no line of its
// resources (the reference store of this package's own tests): they are rules of the line, kept
// by the stores with one (SQLite, PostgreSQL, and the server over them).
func requireLineRules(t *testing.T, e *jobEnv) {
	t.Helper()
	ls, ok := e.s.(store.Store)
	requireNotApplicable(t, ok && ls.Capabilities().Line, "the store keeps no line: latest wins and rates are rules of the line")
}
