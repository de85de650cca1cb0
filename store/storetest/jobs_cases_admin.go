package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

func testJobIdempotency(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "idem"}, store.Kind{Name: "idem.rej", Policy: store.PolicyReject})
	if err := CheckJobIdempotency(e.ctx, e.s, 32); err != nil {
		t.Fatal(err)
	}
	// The key wins over every other field, even a policy that would refuse.
	a := e.submit(store.SubmitParams{Kind: "idem.rej", Resource: "idem/1", IdempotencyKey: "deploy-42", Args: mustJSON(map[string]int{"v": 1})})
	for _, p := range []store.SubmitParams{
		{Kind: "idem.rej", Resource: "idem/1", IdempotencyKey: "deploy-42"},
		{Kind: "idem", Resource: "idem/other", IdempotencyKey: "deploy-42", Args: mustJSON(map[string]int{"v": 2}), Priority: 3},
	} {
		res, err := e.s.SubmitJob(e.ctx, &p)
		if err != nil || !res.Existing || res.Job.ID != a.ID || res.Job.Resource != "idem/1" || res.Job.Kind != "idem.rej" {
			t.Fatalf("submit %+v with an existing key = %+v, %v; want job %d as submitted, Existing", p, res, err, a.ID)
		}
	}
	var args map[string]int
	if err := json.Unmarshal(e.get(a.ID).Args, &args); err != nil || args["v"] != 1 {
		t.Fatalf("args after a repeated submit: %v (%v); want the first submit's", args, err)
	}
	if got := e.listAll(store.JobListParams{Kind: "idem.rej"}); len(got) != 1 {
		t.Fatalf("jobs of idem.rej: %v; want 1", ids(got))
	}
}

func testJobRetryByHand(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "rh", MaxAttempts: 2}, store.Kind{Name: "rh.skip", Policy: store.PolicySkip})
	a := e.sub("rh", "rh/1")
	j := e.claimOne(a.ID, "rh")
	e.fail(j, store.FailParams{Message: "1"})
	j = e.claimOne(a.ID, "rh")
	dead := e.fail(j, store.FailParams{Message: "2"})
	if dead.State != store.JobDiscarded {
		t.Fatalf("%s; want discarded", show(dead))
	}
	b := e.sub("rh", "rh/1")
	// Back of the queue: behind b, submitted after it died.
	r := e.retry(a.ID)
	if r.State != store.JobAvailable || r.Head || r.Seq <= b.Seq || r.MaxAttempts != 3 || r.Attempt != 2 || !r.FinishedAt.IsZero() {
		t.Fatalf("retry by hand of a discarded job: %s; want available behind job %d (seq %d), max attempts raised to 3",
			show(r), b.ID, b.Seq)
	}
	jb := e.claimOne(b.ID, "rh")
	// Running and succeeded jobs cannot be retried.
	_, err := e.s.RetryJob(e.ctx, b.ID)
	wantJobState(t, "retry of a running job", err, b.ID, "retry", store.JobRunning)
	e.complete(jb)
	_, err = e.s.RetryJob(e.ctx, b.ID)
	wantJobState(t, "retry of a succeeded job", err, b.ID, "retry", store.JobSucceeded)
	j = e.claimOne(a.ID, "rh")
	if j.Attempt != 3 {
		t.Fatalf("claim of the retried job: %s; want attempt 3", show(j))
	}
	e.complete(j)
	_, err = e.s.RetryJob(e.ctx, a.ID+1000)
	wantErr(t, "retry of an unknown job", err, store.ErrNotFound)
	// Cancelled and skipped jobs can be retried; a retried head is claimable.
	c := e.sub("rh.skip", "rh/2")
	s := e.sub("rh.skip", "rh/2")
	if s.State != store.JobSkipped {
		t.Fatalf("%s; want skipped", show(s))
	}
	e.cancel(c.ID)
	if r := e.retry(s.ID); r.State != store.JobAvailable || !r.Head {
		t.Fatalf("retry of a skipped job on a free resource: %s; want an available head", show(r))
	}
	if r := e.retry(c.ID); r.State != store.JobAvailable || r.Head {
		t.Fatalf("retry of a cancelled job behind another: %s; want available, not head", show(r))
	}
	e.complete(e.claimOne(s.ID, "rh.skip"))
	e.complete(e.claimOne(c.ID, "rh.skip"))
	// A retryable job in its backoff becomes claimable now.
	d := e.sub("rh", "rh/3")
	e.fail(e.claimOne(d.ID, "rh"), store.FailParams{Message: "later", RetryAfter: time.Hour})
	e.claimNone("backing off", "rh")
	if r := e.retry(d.ID); r.Attempt != 1 || r.State.Final() || r.State == store.JobRunning {
		t.Fatalf("retry of a retryable job: %s; want it unfinished, not run", show(r))
	}
	e.claimOne(d.ID, "rh")
}

func testJobPurge(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "pg", MaxAttempts: 1}, store.Kind{Name: "pg.b", MaxAttempts: 1})
	discard := func(p store.SubmitParams) *store.Job {
		t.Helper()
		j := e.submit(p)
		return e.fail(e.claimOne(j.ID, p.Kind), store.FailParams{Message: "dead"})
	}
	d1 := discard(store.SubmitParams{Kind: "pg", Resource: "pg/1", IdempotencyKey: "purge-key"})
	d2 := discard(store.SubmitParams{Kind: "pg", Resource: "pg/2"})
	d3 := discard(store.SubmitParams{Kind: "pg.b", Resource: "pg/3"})
	s := e.sub("pg", "pg/4")
	e.complete(e.claimOne(s.ID, "pg"))
	u := e.sub("pg", "pg/5")
	c := e.sub("pg", "pg/6")
	e.cancel(c.ID)
	purge := func(p store.PurgeParams, want int) {
		t.Helper()
		n, err := e.s.PurgeJobs(e.ctx, &p)
		if err != nil || n != want {
			t.Fatalf("PurgeJobs(%+v) = %d, %v; want %d", p, n, err, want)
		}
	}
	purge(store.PurgeParams{IDs: []int64{s.ID, u.ID, c.ID}}, 0)
	purge(store.PurgeParams{Kind: "pg.b"}, 1)
	e.gone(d3.ID)
	purge(store.PurgeParams{Resource: "pg/1"}, 1)
	e.gone(d1.ID)
	purge(store.PurgeParams{IDs: []int64{d2.ID, s.ID}, Kind: "pg.b"}, 0)
	purge(store.PurgeParams{}, 1)
	e.gone(d2.ID)
	for _, id := range []int64{s.ID, u.ID, c.ID} {
		e.get(id)
	}
	// The purged job's idempotency key is free again.
	res, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "pg", Resource: "pg/1", IdempotencyKey: "purge-key"})
	if err != nil || res.Existing || res.Job.ID == d1.ID {
		t.Fatalf("submit with a purged job's key = %+v, %v; want a new job", res, err)
	}
}

func testJobClean(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "cl", MaxAttempts: 1}, store.Kind{Name: "cl.skip", Policy: store.PolicySkip})
	succeeded := e.sub("cl", "cl/1")
	e.complete(e.claimOne(succeeded.ID, "cl"))
	discarded := e.sub("cl", "cl/2")
	e.fail(e.claimOne(discarded.ID, "cl"), store.FailParams{Message: "dead"})
	cancelled := e.sub("cl", "cl/3")
	e.cancel(cancelled.ID)
	available := e.sub("cl.skip", "cl/4")
	skipped := e.sub("cl.skip", "cl/4")
	running := e.sub("cl", "cl/5")
	e.claimOne(running.ID, "cl")
	retryable := e.submit(store.SubmitParams{Kind: "cl", Resource: "cl/6", MaxAttempts: 2})
	e.fail(e.claimOne(retryable.ID, "cl"), store.FailParams{Message: "later", RetryAfter: 3 * time.Hour})
	scheduled := e.submit(store.SubmitParams{Kind: "cl", Resource: "cl/7", Delay: 24 * time.Hour})
	unfinished := []int64{available.ID, running.ID, retryable.ID, scheduled.ID}
	clean := func(p store.CleanParams) int {
		t.Helper()
		n, err := e.s.CleanJobs(e.ctx, &p)
		if err != nil || n < 0 || n > p.Limit {
			t.Fatalf("CleanJobs(%+v) = %d, %v", p, n, err)
		}
		return n
	}
	if n := clean(store.CleanParams{Age: time.Hour, Discarded: true, Limit: 100}); n != 0 {
		t.Fatalf("CleanJobs(age 1h) deleted %d jobs that finished just now", n)
	}
	// drain cleans with p until want jobs went, two at most per call.
	drain := func(p store.CleanParams, want int) {
		t.Helper()
		p.Limit = 2
		deleted := 0
		e.poll(fmt.Sprintf("CleanJobs(%+v) deletes %d jobs", p, want), 10*time.Second, func() bool {
			deleted += clean(p)
			return deleted >= want
		})
		if deleted != want {
			t.Fatalf("CleanJobs(%+v) deleted %d jobs; want %d", p, deleted, want)
		}
	}
	var recent *store.Job
	if e.canAdvance() {
		e.advance(2 * time.Hour)
		recent = e.sub("cl", "cl/8")
		e.complete(e.claimOne(recent.ID, "cl"))
		drain(store.CleanParams{Age: time.Hour}, 3)
	} else {
		drain(store.CleanParams{}, 3)
	}
	for _, id := range []int64{succeeded.ID, cancelled.ID, skipped.ID} {
		e.gone(id)
	}
	for _, id := range append(unfinished, discarded.ID) {
		e.get(id)
	}
	if e.canAdvance() {
		drain(store.CleanParams{Age: time.Hour, Discarded: true}, 1)
		e.expectState(recent.ID, store.JobSucceeded)
	} else {
		drain(store.CleanParams{Discarded: true}, 1)
	}
	e.gone(discarded.ID)
	for _, id := range unfinished {
		e.get(id)
	}
}

func testJobResources(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "res"})
	_, err := e.s.GetResource(e.ctx, "res/x")
	wantErr(t, "GetResource of a resource never used", err, store.ErrNotFound)
	r := e.setState("res/x", "A")
	if r.Key != "res/x" || r.State != "A" || r.Version < 1 || r.UpdatedAt.IsZero() || r.RunningJob != 0 || r.Unfinished != 0 {
		t.Fatalf("SetResourceState on a new resource = %+v; want state A, a version", r)
	}
	v := r.Version
	if r = e.setState("res/x", "B"); r.State != "B" || r.Version != v+1 {
		t.Fatalf("second SetResourceState = %+v; want B at version %d", r, v+1)
	}
	cur := r.Version
	r, err = e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{Key: "res/x", State: "C", IfVersion: &cur})
	if err != nil || r.State != "C" || r.Version != cur+1 {
		t.Fatalf("compare-and-set at the current version = %+v, %v; want C at version %d", r, err, cur+1)
	}
	_, err = e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{Key: "res/x", State: "D", IfVersion: &cur})
	var mm *store.VersionMismatchError
	if !errors.As(err, &mm) || !errors.Is(err, store.ErrVersionMismatch) || mm.Key != "res/x" || mm.Want != cur || mm.Current != cur+1 {
		t.Fatalf("compare-and-set at a stale version: %v; want VersionMismatchError (want %d, current %d)", err, cur, cur+1)
	}
	if r = e.resource("res/x"); r.State != "C" || r.Version != cur+1 {
		t.Fatalf("resource after a refused compare-and-set = %+v; want C at version %d", r, cur+1)
	}
	// RunningJob and Unfinished follow the jobs.
	a := e.sub("res", "res/y")
	e.sub("res", "res/y")
	if r = e.resource("res/y"); r.State != "" || r.RunningJob != 0 || r.Unfinished != 2 {
		t.Fatalf("resource with 2 queued jobs = %+v", r)
	}
	j := e.claimOne(a.ID, "res")
	if r = e.resource("res/y"); r.RunningJob != a.ID || r.Unfinished != 2 {
		t.Fatalf("resource with a running job = %+v; want RunningJob %d, 2 unfinished", r, a.ID)
	}
	e.complete(j)
	if r = e.resource("res/y"); r.RunningJob != 0 || r.Unfinished != 1 {
		t.Fatalf("resource after a completion = %+v; want nothing running, 1 unfinished", r)
	}
	// Listing by prefix, with paging; LIKE metacharacters are plain characters.
	for _, k := range []string{"list/3", "list/1", "list/5", "list/2", "list/4", "lis", "listing", "old/list/1", "p%/x", "p_/y", "pa/z"} {
		e.setState(k, "S")
	}
	list := func(p store.ResourceListParams) []string {
		t.Helper()
		var keys []string
		for {
			page, err := e.s.ListResources(e.ctx, &p)
			if err != nil {
				t.Fatalf("ListResources(%+v): %v", p, err)
			}
			if len(page) > p.Limit && p.Limit > 0 {
				t.Fatalf("ListResources(%+v) returned %d", p, len(page))
			}
			for _, r := range page {
				keys = append(keys, r.Key)
			}
			if len(page) == 0 || len(page) < p.Limit || p.Limit == 0 {
				return keys
			}
			p.After = page[len(page)-1].Key
		}
	}
	for _, c := range []struct {
		p    store.ResourceListParams
		want []string
	}{
		{store.ResourceListParams{Prefix: "list/", Limit: 2}, []string{"list/1", "list/2", "list/3", "list/4", "list/5"}},
		{store.ResourceListParams{Prefix: "list"}, []string{"list/1", "list/2", "list/3", "list/4", "list/5", "listing"}},
		{store.ResourceListParams{Prefix: "list/", After: "list/3"}, []string{"list/4", "list/5"}},
		{store.ResourceListParams{Prefix: "p%"}, []string{"p%/x"}},
		{store.ResourceListParams{Prefix: "p_"}, []string{"p_/y"}},
		{store.ResourceListParams{Prefix: "res/"}, []string{"res/x", "res/y"}},
		{store.ResourceListParams{Limit: 3}, []string{"lis", "list/1", "list/2", "list/3", "list/4", "list/5", "listing", "old/list/1", "p%/x", "p_/y", "pa/z", "res/x", "res/y"}},
	} {
		if got := list(c.p); !slices.Equal(got, c.want) {
			t.Fatalf("ListResources(%+v), all pages = %v; want %v", c.p, got, c.want)
		}
	}
	page, err := e.s.ListResources(e.ctx, &store.ResourceListParams{Prefix: "res/y"})
	if err != nil || len(page) != 1 || page[0].Unfinished != 1 {
		t.Fatalf("ListResources(res/y) = %+v, %v; want its counts too", page, err)
	}
}

func testJobCounts(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "cnt.a"}, store.Kind{Name: "cnt.b"})
	e.claimOne(e.sub("cnt.a", "cnt/1").ID, "cnt.a") // running
	r := e.sub("cnt.a", "cnt/2")
	e.fail(e.claimOne(r.ID, "cnt.a"), store.FailParams{Message: "x", RetryAfter: time.Hour}) // retryable
	s := e.sub("cnt.a", "cnt/3")
	e.complete(e.claimOne(s.ID, "cnt.a")) // succeeded: not counted
	e.submit(store.SubmitParams{Kind: "cnt.a", Resource: "cnt/4", Delay: time.Hour})
	e.sub("cnt.a", "cnt/5")
	e.sub("cnt.a", "cnt/5")
	for i := range 3 {
		e.sub("cnt.b", fmt.Sprintf("cnt/b%d", i))
	}
	c := e.sub("cnt.b", "cnt/b0")
	e.cancel(c.ID) // cancelled: not counted
	counts, err := e.s.JobCounts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range counts {
		if c.State.Final() && c.Count != 0 {
			t.Fatalf("JobCounts reports %d %s jobs of %s; it counts unfinished states only", c.Count, c.State, c.Kind)
		}
		if c.Count != 0 {
			got[c.Kind+"/"+string(c.State)] += c.Count
		}
	}
	want := map[string]int64{"cnt.a/running": 1, "cnt.a/retryable": 1, "cnt.a/scheduled": 1, "cnt.a/available": 2, "cnt.b/available": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("JobCounts = %v; want %v", got, want)
	}
}

func testJobBadSubmit(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bad"})
	for _, c := range []struct {
		name  string
		p     store.SubmitParams
		field string
	}{
		{"unregistered kind", store.SubmitParams{Kind: "nope", Resource: "bad/unknown-kind", IdempotencyKey: "k1"}, "kind"},
		{"malformed kind", store.SubmitParams{Kind: "bad kind", Resource: "bad/kind"}, "kind"},
		{"empty kind", store.SubmitParams{Resource: "bad/kind"}, "kind"},
		{"args an array", store.SubmitParams{Kind: "bad", Resource: "bad/args", Args: json.RawMessage(`[1,2]`), IdempotencyKey: "k2"}, "args"},
		{"args a string", store.SubmitParams{Kind: "bad", Resource: "bad/args", Args: json.RawMessage(`"x"`)}, "args"},
		{"args not JSON", store.SubmitParams{Kind: "bad", Resource: "bad/args", Args: json.RawMessage(`{"a":`)}, "args"},
		{"args invalid UTF-8", store.SubmitParams{Kind: "bad", Resource: "bad/args", Args: json.RawMessage("{\"a\":\"\xff\"}")}, "args"},
		{"args unpaired surrogate", store.SubmitParams{Kind: "bad", Resource: "bad/args", Args: json.RawMessage(`{"a":"\udc00"}`)}, "args"},
		{"args NUL", store.SubmitParams{Kind: "bad", Resource: "bad/args", Args: json.RawMessage(`{"a":"\u0000"}`)}, "args"},
		{"args too long", store.SubmitParams{Kind: "bad", Resource: "bad/args",
			Args: mustJSON(map[string]string{"a": strings.Repeat("x", store.MaxArgsLen)})}, "args"},
		{"empty resource", store.SubmitParams{Kind: "bad"}, "resource"},
		{"control character in resource", store.SubmitParams{Kind: "bad", Resource: "bad/\x01"}, "resource"},
		{"invalid UTF-8 resource", store.SubmitParams{Kind: "bad", Resource: "bad/\xff"}, "resource"},
		{"resource too long", store.SubmitParams{Kind: "bad", Resource: "bad/" + strings.Repeat("r", store.MaxKeyLen)}, "resource"},
		{"negative max attempts", store.SubmitParams{Kind: "bad", Resource: "bad/attempts", MaxAttempts: -1}, "max_attempts"},
		{"priority above the range", store.SubmitParams{Kind: "bad", Resource: "bad/prio", Priority: store.MaxPriority + 1}, "priority"},
		{"negative priority", store.SubmitParams{Kind: "bad", Resource: "bad/prio", Priority: -1}, "priority"},
		{"unknown policy", store.SubmitParams{Kind: "bad", Resource: "bad/policy", Policy: "sometimes"}, "policy"},
		{"negative delay", store.SubmitParams{Kind: "bad", Resource: "bad/delay", Delay: -time.Second}, "delay"},
		{"delay and time", store.SubmitParams{Kind: "bad", Resource: "bad/delay", Delay: time.Second, ScheduledAt: time.Now()}, "scheduled_at"},
		{"control character in key", store.SubmitParams{Kind: "bad", Resource: "bad/key", IdempotencyKey: "k\n"}, "idempotency_key"},
	} {
		_, err := e.s.SubmitJob(e.ctx, &c.p)
		wantInvalid(t, "submit with "+c.name, err, c.field)
	}
	// Nothing written: no job, no resource, no idempotency key.
	if got := e.listAll(store.JobListParams{}); len(got) != 0 {
		t.Fatalf("jobs after refused submits: %v", ids(got))
	}
	for _, key := range []string{"bad/unknown-kind", "bad/kind", "bad/args", "bad/attempts", "bad/prio", "bad/policy", "bad/delay", "bad/key"} {
		r, err := e.s.GetResource(e.ctx, key)
		wantErr(t, fmt.Sprintf("GetResource(%q) after a refused submit (got %+v)", key, r), err, store.ErrNotFound)
	}
	if rs, err := e.s.ListResources(e.ctx, &store.ResourceListParams{}); err != nil || len(rs) != 0 {
		t.Fatalf("resources after refused submits: %+v, %v", rs, err)
	}
	for _, key := range []string{"k1", "k2"} {
		res, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "bad", Resource: "good", IdempotencyKey: key})
		if err != nil || res.Existing {
			t.Fatalf("submit with the key %q of a refused submit = %+v, %v; want a new job", key, res, err)
		}
	}
}

func testJobBadInput(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "bi"})
	j := e.claimOne(e.sub("bi", "bi/1").ID, "bi")
	claim := func(p store.ClaimParams) error { _, err := e.s.ClaimJobs(e.ctx, &p); return err }
	for _, c := range []struct {
		name  string
		err   error
		field string
	}{
		{"claim without worker", claim(store.ClaimParams{Kinds: []string{"bi"}, Limit: 1, TTL: time.Minute}), "worker"},
		{"claim without kinds", claim(store.ClaimParams{Worker: "w", Limit: 1, TTL: time.Minute}), "kinds"},
		{"claim with limit 0", claim(store.ClaimParams{Worker: "w", Kinds: []string{"bi"}, TTL: time.Minute}), "limit"},
		{"claim above the limit", claim(store.ClaimParams{Worker: "w", Kinds: []string{"bi"}, Limit: store.MaxClaimLimit + 1, TTL: time.Minute}), "limit"},
		{"claim with a short TTL", claim(store.ClaimParams{Worker: "w", Kinds: []string{"bi"}, Limit: 1, TTL: time.Millisecond}), "ttl"},
		{"heartbeat without token", func() error {
			_, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, TTL: time.Minute})
			return err
		}(), "token"},
		{"complete of ID 0", func() error { _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{Token: j.Token}); return err }(), "id"},
		{"fail with a bad code", func() error {
			_, err := e.s.FailJob(e.ctx, &store.FailParams{ID: j.ID, Token: j.Token, Code: "not a code"})
			return err
		}(), "code"},
		{"fail with a negative backoff", func() error {
			_, err := e.s.FailJob(e.ctx, &store.FailParams{ID: j.ID, Token: j.Token, RetryAfter: -time.Second})
			return err
		}(), "retry_after"},
		{"list with a bad state", func() error { _, err := e.s.ListJobs(e.ctx, &store.JobListParams{State: "done"}); return err }(), "state"},
		{"list with a negative limit", func() error { _, err := e.s.ListJobs(e.ctx, &store.JobListParams{Limit: -1}); return err }(), "limit"},
		{"list with NUL in the resource", func() error { _, err := e.s.ListJobs(e.ctx, &store.JobListParams{Resource: "bi\x00"}); return err }(), "resource"},
		{"list with an invalid UTF-8 resource", func() error { _, err := e.s.ListJobs(e.ctx, &store.JobListParams{Resource: "bi\xff"}); return err }(), "resource"},
		{"list resources with NUL in the prefix", func() error {
			_, err := e.s.ListResources(e.ctx, &store.ResourceListParams{Prefix: "bi\x00"})
			return err
		}(), "prefix"},
		{"list resources after invalid UTF-8", func() error {
			_, err := e.s.ListResources(e.ctx, &store.ResourceListParams{After: "bi/\xff"})
			return err
		}(), "after"},
		{"get an invalid UTF-8 resource", func() error { _, err := e.s.GetResource(e.ctx, "bi/\xff"); return err }(), "resource"},
		{"purge an invalid UTF-8 resource", func() error { _, err := e.s.PurgeJobs(e.ctx, &store.PurgeParams{Resource: "\xff"}); return err }(), "resource"},
		{"set an invalid UTF-8 state", func() error {
			_, err := e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{Key: "bi/2", State: "S\xff"})
			return err
		}(), "state"},
		{"purge of ID -1", func() error { _, err := e.s.PurgeJobs(e.ctx, &store.PurgeParams{IDs: []int64{-1}}); return err }(), "id"},
		{"clean with a negative age", func() error { _, err := e.s.CleanJobs(e.ctx, &store.CleanParams{Age: -time.Hour}); return err }(), "age"},
		{"set an empty state", func() error {
			_, err := e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{Key: "bi/2"})
			return err
		}(), "state"},
		{"set a state on an empty key", func() error {
			_, err := e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{State: "X"})
			return err
		}(), "resource"},
	} {
		wantInvalid(t, c.name, c.err, c.field)
	}
	// The refused calls changed nothing.
	if g := e.expectState(j.ID, store.JobRunning); len(g.Errors) != 0 || g.Token != j.Token {
		t.Fatalf("after refused calls: %s", show(g))
	}
	_, err := e.s.GetResource(e.ctx, "bi/2")
	wantErr(t, "GetResource after a refused SetResourceState", err, store.ErrNotFound)
	// A failure message is what the handler's error said: invalid UTF-8 and NUL (which
	// PostgreSQL cannot store) are cleaned, not refused.
	failed := e.fail(j, store.FailParams{Message: "a\x00b\xff"})
	if n := len(failed.Errors); n == 0 || failed.Errors[n-1].Message != "a\uFFFDb\uFFFD" {
		t.Fatalf("fail with NUL and invalid UTF-8 in the message: %s", show(failed))
	}
}
