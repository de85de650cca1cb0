package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// submitMany submits a batch that must succeed and checks the result is aligned with it.
func (e *jobEnv) submitMany(ps ...store.SubmitParams) []*store.SubmitResult {
	e.t.Helper()
	in := make([]*store.SubmitParams, len(ps))
	for i := range ps {
		in[i] = &ps[i]
	}
	out, err := e.s.SubmitMany(e.ctx, in)
	if err != nil {
		e.t.Fatalf("SubmitMany(%d jobs): %v", len(ps), err)
	}
	if len(out) != len(ps) {
		e.t.Fatalf("SubmitMany(%d jobs) returned %d results", len(ps), len(out))
	}
	for i, r := range out {
		if r == nil || r.Job == nil {
			e.t.Fatalf("SubmitMany result %d is empty", i)
		}
	}
	return out
}

// wantNothingWritten fails if the store holds any job, or a resource under prefix.
func (e *jobEnv) wantNothingWritten(what, prefix string) {
	e.t.Helper()
	if got := e.listAll(store.JobListParams{}); len(got) != 0 {
		e.t.Fatalf("%s: jobs %v were written; want none", what, ids(got))
	}
	rs, err := e.s.ListResources(e.ctx, &store.ResourceListParams{Prefix: prefix})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(rs) != 0 {
		e.t.Fatalf("%s: resource %q was created; want none", what, rs[0].Key)
	}
}

// testJobSubmitManyOrder: a batch over several resources keeps batch order within each resource
// (queue positions and claims), marks exactly the first job of each free resource as its head,
// queues the rest, and wakes the kind's subscribers.
func testJobSubmitManyOrder(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bo"})
	pre := e.sub("bo", "bo/busy")
	wake, cancel := e.s.SubscribeJobs("bo")
	defer cancel()
	const resources, perResource = 7, 8
	var ps []store.SubmitParams
	for i := 0; i < perResource; i++ {
		for r := 0; r < resources; r++ {
			ps = append(ps, store.SubmitParams{Kind: "bo", Resource: fmt.Sprintf("bo/%d", r),
				Args: mustJSON(map[string]int{"n": i})})
		}
	}
	ps = append(ps, store.SubmitParams{Kind: "bo", Resource: "bo/busy"},
		store.SubmitParams{Kind: "bo", Resource: "bo/later", Delay: time.Hour})
	out := e.submitMany(ps...)
	select {
	case <-wake:
	case <-e.ctx.Done():
		t.Fatal("no wake-up after a batch that made heads")
	}
	last := map[string]*store.Job{}
	for i, r := range out {
		j := r.Job
		if r.Existing || j.ID <= pre.ID || j.Kind != "bo" || j.Resource != ps[i].Resource {
			t.Fatalf("result %d = %s (existing %v); want a new job of kind bo on %q", i, show(j), r.Existing, ps[i].Resource)
		}
		prev := last[j.Resource]
		wantHead := prev == nil && j.Resource != "bo/busy"
		if j.Head != wantHead {
			t.Fatalf("result %d = %s; want head=%v (first job of a free resource)", i, show(j), wantHead)
		}
		if prev != nil && (j.Seq <= prev.Seq || j.ID <= prev.ID) {
			t.Fatalf("job %s queued before %s, submitted earlier in the batch", show(j), show(prev))
		}
		if got := e.get(j.ID); got.Head != j.Head || got.State != j.State || got.Seq != j.Seq || argN(t, got) != argN(t, j) {
			t.Fatalf("GetJob(%d) = %s; SubmitMany returned %s", j.ID, show(got), show(j))
		}
		last[j.Resource] = j
	}
	if j := out[len(out)-1].Job; j.State != store.JobScheduled || !j.Head {
		t.Fatalf("delayed job of a batch = %s; want a scheduled head", show(j))
	}
	if j := out[len(out)-2].Job; j.State != store.JobAvailable || j.Head {
		t.Fatalf("batch job on a busy resource = %s; want available, queued behind %d", show(j), pre.ID)
	}
	// Each resource runs its jobs in batch order.
	for i := 0; i < perResource; i++ {
		got := e.claim(store.MaxClaimLimit, "bo")
		want := 0
		if i < 2 {
			want = 1 // on bo/busy: the job that was there before, then the batch's
		}
		if len(got) != resources+want {
			t.Fatalf("round %d: claimed %d jobs; want one per resource (%d)", i, len(got), resources+want)
		}
		for _, j := range got {
			if j.Resource != "bo/busy" && argN(t, j) != i {
				t.Fatalf("round %d: claimed %s with args %s; want the batch's job n=%d of its resource", i, show(j), j.Args, i)
			}
			e.complete(j)
		}
	}
}

// argN decodes the "n" of a job's args (-1 without), as stores may reformat the JSON.
func argN(t *testing.T, j *store.Job) int {
	t.Helper()
	a := struct{ N *int }{}
	if err := json.Unmarshal(j.Args, &a); err != nil {
		t.Fatalf("args of %s: %v", show(j), err)
	}
	if a.N == nil {
		return -1
	}
	return *a.N
}

// testJobSubmitManyIdempotency: a key that names a job returns it; a key repeated in the batch
// creates one job, returned again for the later occurrences, whatever their other fields say.
func testJobSubmitManyIdempotency(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bi"}, store.Kind{Name: "bi2"})
	old := e.submit(store.SubmitParams{Kind: "bi", Resource: "bi/1", IdempotencyKey: "bi-old"})
	out := e.submitMany(
		store.SubmitParams{Kind: "bi", Resource: "bi/2", IdempotencyKey: "bi-old"},      // 0: existing
		store.SubmitParams{Kind: "bi", Resource: "bi/2", IdempotencyKey: "bi-new"},      // 1: new, head
		store.SubmitParams{Kind: "bi2", Resource: "bi/3", IdempotencyKey: "bi-new"},     // 2: = 1
		store.SubmitParams{Kind: "bi", Resource: "bi/2"},                                // 3: new, queued
		store.SubmitParams{Kind: "unknown", Resource: "bi/4", IdempotencyKey: "bi-old"}, // 4: = old
		store.SubmitParams{Kind: "bi", Resource: "bi/1", IdempotencyKey: "bi-new"},      // 5: = 1
	)
	want := []struct {
		id       int64
		existing bool
	}{{old.ID, true}, {out[1].Job.ID, false}, {out[1].Job.ID, true}, {out[3].Job.ID, false}, {old.ID, true}, {out[1].Job.ID, true}}
	for i, w := range want {
		if out[i].Job.ID != w.id || out[i].Existing != w.existing {
			t.Fatalf("result %d = job %d existing=%v; want job %d existing=%v", i, out[i].Job.ID, out[i].Existing, w.id, w.existing)
		}
	}
	if j := out[1].Job; j.Resource != "bi/2" || !j.Head || j.IdempotencyKey != "bi-new" {
		t.Fatalf("first occurrence of a new key = %s; want a head on bi/2", show(j))
	}
	if j := out[3].Job; j.Head || j.Seq <= out[1].Job.Seq {
		t.Fatalf("job after a keyed one on bi/2 = %s; want queued behind %d", show(j), out[1].Job.ID)
	}
	if j := out[2].Job; j.Kind != "bi" || j.Resource != "bi/2" {
		t.Fatalf("repeated key returned %s; want the first occurrence's job as it was stored", show(j))
	}
	if got := e.listAll(store.JobListParams{}); len(got) != 3 {
		t.Fatalf("jobs after the batch: %v; want 3 (one per new key, one without)", ids(got))
	}
	// Submitting the same batch again creates only the job without a key.
	again := e.submitMany(
		store.SubmitParams{Kind: "bi", Resource: "bi/2", IdempotencyKey: "bi-new"},
		store.SubmitParams{Kind: "bi", Resource: "bi/2", IdempotencyKey: "bi-old"},
	)
	if again[0].Job.ID != out[1].Job.ID || !again[0].Existing || again[1].Job.ID != old.ID || !again[1].Existing {
		t.Fatalf("repeated batch = jobs %d, %d; want the existing %d and %d", again[0].Job.ID, again[1].Job.ID, out[1].Job.ID, old.ID)
	}
}

// testJobSubmitManyPolicies: skip and reject apply per job, against the resource's jobs before the
// batch and against the jobs before it in the batch; one refusal refuses the whole batch.
func testJobSubmitManyPolicies(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bq"}, store.Kind{Name: "bs", Policy: store.PolicySkip},
		store.Kind{Name: "br", Policy: store.PolicyReject})
	pre := e.sub("bq", "bp/busy")
	out := e.submitMany(
		store.SubmitParams{Kind: "bs", Resource: "bp/busy"},                      // 0: skipped (pre)
		store.SubmitParams{Kind: "bs", Resource: "bp/free"},                      // 1: head
		store.SubmitParams{Kind: "bs", Resource: "bp/free"},                      // 2: skipped (1)
		store.SubmitParams{Kind: "br", Resource: "bp/other"},                     // 3: head
		store.SubmitParams{Kind: "br", Resource: "bp/free", Policy: "queue"},     // 4: queued
		store.SubmitParams{Kind: "bq", Resource: "bp/other", Policy: "skip"},     // 5: skipped (3)
		store.SubmitParams{Kind: "bs", Resource: "bp/skipfirst", Policy: "skip"}, // 6: head
	)
	for _, c := range []struct {
		i     int
		state store.JobState
		head  bool
		busy  int64 // the head a skipped job names
	}{
		{0, store.JobSkipped, false, pre.ID}, {1, store.JobAvailable, true, 0}, {2, store.JobSkipped, false, out[1].Job.ID},
		{3, store.JobAvailable, true, 0}, {4, store.JobAvailable, false, 0}, {5, store.JobSkipped, false, out[3].Job.ID},
		{6, store.JobAvailable, true, 0},
	} {
		j := out[c.i].Job
		if j.State != c.state || j.Head != c.head {
			t.Fatalf("result %d = %s; want %s, head=%v", c.i, show(j), c.state, c.head)
		}
		if c.state == store.JobSkipped {
			if len(j.Errors) != 1 || j.Errors[0].Code != store.CodeResourceBusy ||
				!strings.Contains(j.Errors[0].Message, fmt.Sprint(c.busy)) || j.FinishedAt.IsZero() {
				t.Fatalf("skipped job %d = %s errors %+v; want one resource_busy error naming job %d", c.i, show(j), j.Errors, c.busy)
			}
		}
	}
	if r := e.resource("bp/free"); r.Unfinished != 2 {
		t.Fatalf("bp/free = %+v; want its head and the queued job", r)
	}

	// A refusal, against a job before the batch or one earlier in it, refuses the whole batch.
	before := e.listAll(store.JobListParams{})
	for _, c := range []struct {
		name  string
		ps    []*store.SubmitParams
		index int
		head  int64 // 0: a job of the refused batch, which does not exist
	}{
		{"against a job before the batch", []*store.SubmitParams{
			{Kind: "bq", Resource: "bp/new1", IdempotencyKey: "bp-k1"},
			{Kind: "br", Resource: "bp/busy"},
		}, 1, pre.ID},
		{"against a job of the batch", []*store.SubmitParams{
			{Kind: "bq", Resource: "bp/new2"},
			{Kind: "bs", Resource: "bp/new2"},
			{Kind: "bq", Resource: "bp/new2", Policy: "reject"},
			{Kind: "br", Resource: "bp/new2"},
		}, 2, 0},
	} {
		_, err := e.s.SubmitMany(e.ctx, c.ps)
		var se *store.SubmitManyError
		var busy *store.ResourceBusyError
		if !errors.As(err, &se) || se.Index != c.index || !errors.As(err, &busy) || !errors.Is(err, store.ErrResourceBusy) ||
			busy.Resource != c.ps[c.index].Resource || (c.head != 0 && busy.HeadJob != c.head) {
			t.Fatalf("batch refused %s: %v; want a SubmitManyError at %d around a ResourceBusyError on %q", c.name, err, c.index,
				c.ps[c.index].Resource)
		}
	}
	if got := e.listAll(store.JobListParams{}); !slices.Equal(ids(got), ids(before)) {
		t.Fatalf("jobs after refused batches: %v; want those before, %v", ids(got), ids(before))
	}
	for _, key := range []string{"bp/new1", "bp/new2"} {
		_, err := e.s.GetResource(e.ctx, key)
		wantErr(t, "GetResource("+key+") after a refused batch", err, store.ErrNotFound)
	}
	// The key of the refused batch was not taken.
	if r := e.submitMany(store.SubmitParams{Kind: "bq", Resource: "bp/new1", IdempotencyKey: "bp-k1"}); r[0].Existing {
		t.Fatalf("key of a refused batch names job %d", r[0].Job.ID)
	}
}

// testJobSubmitManyBadInput: bad input anywhere refuses the whole batch with an error naming the job
// and its field, and writes nothing; so do an empty and an oversized batch.
func testJobSubmitManyBadInput(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bb"})
	ok := func(r string) *store.SubmitParams { return &store.SubmitParams{Kind: "bb", Resource: "bb/" + r} }
	huge := make([]*store.SubmitParams, store.MaxSubmitMany+1)
	for i := range huge {
		huge[i] = ok("huge")
	}
	for _, c := range []struct {
		name  string
		ps    []*store.SubmitParams
		field string
	}{
		{"no jobs", nil, "jobs"},
		{"too many jobs", huge, "jobs"},
		{"a null job", []*store.SubmitParams{ok("a"), nil}, "jobs[1]"},
		{"an empty resource", []*store.SubmitParams{ok("a"), ok("b"), {Kind: "bb"}}, "jobs[2].resource"},
		{"bad args", []*store.SubmitParams{ok("a"), {Kind: "bb", Resource: "bb/c", Args: []byte(`[1]`)}}, "jobs[1].args"},
		{"a bad priority", []*store.SubmitParams{{Kind: "bb", Resource: "bb/c", Priority: -1}, ok("a")}, "jobs[0].priority"},
		{"an unregistered kind", []*store.SubmitParams{ok("a"), {Kind: "nope", Resource: "bb/d", IdempotencyKey: "bb-k"}, ok("e")}, "jobs[1].kind"},
		{"an unregistered kind after a refusable job", []*store.SubmitParams{ok("a"), ok("b"), {Kind: "nope", Resource: "bb/f"}}, "jobs[2].kind"},
	} {
		_, err := e.s.SubmitMany(e.ctx, c.ps)
		wantInvalid(t, "batch with "+c.name, err, c.field)
	}
	e.wantNothingWritten("after refused batches", "bb/")
	if r := e.submitMany(store.SubmitParams{Kind: "bb", Resource: "bb/d", IdempotencyKey: "bb-k"}); r[0].Existing {
		t.Fatalf("key of a refused batch names job %d", r[0].Job.ID)
	}
	// A large batch (a tenth of the limit: the limit itself takes long under -race) is one step.
	full := make([]*store.SubmitParams, store.MaxSubmitMany/10)
	for i := range full {
		full[i] = &store.SubmitParams{Kind: "bb", Resource: fmt.Sprintf("bb/full/%d", i%100)}
	}
	out, err := e.s.SubmitMany(e.ctx, full)
	if err != nil || len(out) != len(full) {
		t.Fatalf("batch of %d jobs: %d results, %v", len(full), len(out), err)
	}
	if r := e.resource("bb/full/7"); r.Unfinished != int64(len(full)/100) {
		t.Fatalf("resource of a large batch = %+v; want %d unfinished jobs", r, len(full)/100)
	}
}

// testJobSubmitManyConcurrency: concurrent batches over shared resources, some with keys that other
// batches share, leave one head per resource with work, each resource's jobs in the order of
// every batch, and one job per key.
func testJobSubmitManyConcurrency(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bc"})
	const goroutines, batches, perBatch, resources = 4, 5, 40, 7
	type sub struct {
		g, b, i int
		res     *store.SubmitResult
	}
	var mu sync.Mutex
	var all []sub
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for b := range batches {
				ps := make([]*store.SubmitParams, perBatch)
				for i := range ps {
					ps[i] = &store.SubmitParams{Kind: "bc", Resource: fmt.Sprintf("bc/%d", (i+g)%resources),
						Args: mustJSON(map[string]int{"g": g, "b": b, "i": i})}
					if i%10 == 3 {
						ps[i].IdempotencyKey = fmt.Sprintf("bc-%d-%d", b, i) // shared by the goroutines
					}
				}
				out, err := e.s.SubmitMany(e.ctx, ps)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i, r := range out {
					all = append(all, sub{g, b, i, r})
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("concurrent SubmitMany: %v", err)
	}
	byKey := map[string]int64{}
	created := map[string]int{}
	seqOf := map[int64]int64{}
	for _, s := range all {
		j := s.res.Job
		seqOf[j.ID] = j.Seq
		if k := j.IdempotencyKey; k != "" {
			if id, ok := byKey[k]; ok && id != j.ID {
				t.Fatalf("key %q named jobs %d and %d", k, id, j.ID)
			}
			byKey[k] = j.ID
			if !s.res.Existing {
				created[k]++
			}
		}
	}
	for k, n := range created {
		if n != 1 {
			t.Fatalf("key %q: %d submits said they created its job; want 1", k, n)
		}
	}
	// Within one batch, the later job of a resource is queued behind the earlier one.
	last := map[[3]int]int64{} // goroutine, batch, resource → seq of the batch's previous job there
	for _, s := range all {
		if s.res.Existing {
			continue
		}
		k := [3]int{s.g, s.b, (s.i + s.g) % resources}
		if prev, ok := last[k]; ok && s.res.Job.Seq <= prev {
			t.Fatalf("job %s of batch %d/%d queued before an earlier job of that batch on its resource", show(s.res.Job), s.g, s.b)
		}
		last[k] = s.res.Job.Seq
	}
	// One head per resource: the oldest unfinished job.
	jobs := e.listAll(store.JobListParams{Kind: "bc"})
	oldest := map[string]*store.Job{}
	heads := map[string]int{}
	for _, j := range jobs {
		if o := oldest[j.Resource]; o == nil || j.Seq < o.Seq {
			oldest[j.Resource] = j
		}
		if j.Head {
			heads[j.Resource]++
		}
	}
	for r, o := range oldest {
		if heads[r] != 1 || !o.Head {
			t.Fatalf("resource %s: %d heads, oldest job %s; want exactly the oldest as head", r, heads[r], show(o))
		}
	}
	if want := goroutines*batches*perBatch - (goroutines-1)*len(byKey); len(jobs) != want {
		t.Fatalf("%d jobs; want %d (one per key)", len(jobs), want)
	}
}
