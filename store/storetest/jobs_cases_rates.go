package storetest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Kind rates (store/rate.go): at most Max attempt starts of a kind per resource in any window.

// rateSlack absorbs the rounding of grant times on the way to the caller (milliseconds through
// the HTTP API); a store that did not count would miss by a whole window.
const rateSlack = 2 * time.Millisecond

// testJobRateConcurrent: many workers claim many jobs of a rated kind on a few resources; the
// grant times (each attempt's start, on the store's clock, as the claim returned it) hold at most
// Max per resource in every window, and every job runs.
func testJobRateConcurrent(t *testing.T, h JobHarness) { testJobRateWorkers(t, h, "") }

// testJobRateShared is testJobRateConcurrent with shared jobs: every job of a resource is its head
// at once, so only the rate keeps them apart, and concurrent claims count against each other.
func testJobRateShared(t *testing.T, h JobHarness) { testJobRateWorkers(t, h, "shared") }

func testJobRateWorkers(t *testing.T, h JobHarness, mode string) {
	rate := store.Rate{Max: 2, Window: time.Second}
	e := newJobEnv(t, h, store.Kind{Name: "rated", Rate: &rate, Mode: mode})
	requireLineRules(t, e)
	const resources, perResource, workers = 3, 5, 6
	for range perResource {
		for r := range resources {
			e.sub("rated", "rated/"+string(rune('a'+r)))
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	var mu sync.Mutex
	grants := map[string][]time.Time{}
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && done.Load() < resources*perResource {
				jobs, err := e.s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w" + string(rune('0'+w)), Kinds: []string{"rated"}, Limit: 2, TTL: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				for _, j := range jobs {
					mu.Lock()
					grants[j.Resource] = append(grants[j.Resource], j.AttemptedAt)
					mu.Unlock()
					if _, err := e.s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
				if len(jobs) == 0 {
					// The poll of a worker: the next window frees on the store's clock.
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	if n := done.Load(); n != resources*perResource {
		t.Fatalf("%d of %d jobs ran before the deadline", n, resources*perResource)
	}
	for res, ts := range grants {
		checkRateWindows(t, "claims of "+res, rate, ts, perResource)
	}
	// The audit log's claims, where the store keeps one: the grants as the store recorded them.
	if as, ok := e.s.(AuditedJobStore); ok && as.Capabilities().Audit {
		for res := range grants {
			events, err := as.Events(e.ctx, &store.EventsParams{Key: res, Limit: store.MaxListLimit})
			if err != nil {
				t.Fatal(err)
			}
			var ts []time.Time
			for _, ev := range events {
				if ev.Kind == store.EventJobClaim {
					ts = append(ts, ev.At)
				}
			}
			checkRateWindows(t, "audit log of "+res, rate, ts, perResource)
		}
	}
}

// checkRateWindows fails unless ts holds n grants and no window of rate.Window more than
// rate.Max of them.
func checkRateWindows(t *testing.T, what string, rate store.Rate, ts []time.Time, n int) {
	t.Helper()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	if len(ts) != n {
		t.Fatalf("%s: %d grants, want %d", what, len(ts), n)
	}
	for i := 0; i+rate.Max < len(ts); i++ {
		if span := ts[i+rate.Max].Sub(ts[i]); span < rate.Window-rateSlack {
			t.Fatalf("%s: grants %d..%d within %s (%v): more than %s", what, i, i+rate.Max, span, ts, rate)
		}
	}
}

// testJobRateWaits: once the rate is reached the next job stays head, is not claimed, and the
// line says so with the time the window frees; under the skip policy a submit is skipped with
// rate_limited and that time; other resources and kinds are not held back.
func testJobRateWaits(t *testing.T, h JobHarness) {
	rate := store.Rate{Max: 2, Window: time.Hour}
	e := newJobEnv(t, h, store.Kind{Name: "remediate", Rate: &rate},
		store.Kind{Name: "remediate.skip", Policy: store.PolicySkip, Rate: &rate}, store.Kind{Name: "plain"})
	requireLineRules(t, e)
	a, b, c := e.sub("remediate", "wl/1"), e.sub("remediate", "wl/1"), e.sub("remediate", "wl/1")
	first := e.complete(e.claimOne(a.ID, "remediate"))
	e.complete(e.claimOne(b.ID, "remediate"))
	e.claimNone("the rate 2/1h of wl/1 is reached", "remediate")
	want := first.AttemptedAt.Add(rate.Window)
	got := e.get(c.ID)
	if !got.Head || got.State == store.JobRunning || got.ScheduledAt.Before(want.Add(-rateSlack)) || got.ScheduledAt.After(want.Add(rateSlack)) {
		t.Fatalf("third job under a reached rate: %s; want head, waiting until %s", show(got), want.Format(time.RFC3339Nano))
	}
	if lr, ok := e.s.(store.LineReader); ok {
		l, err := lr.ResourceLine(e.ctx, "wl/1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Rates) != 1 || l.Rates[0].Kind != "remediate" || l.Rates[0].Rate != rate ||
			l.Rates[0].Next.Before(want.Add(-rateSlack)) || l.Rates[0].Next.After(want.Add(rateSlack)) {
			t.Fatalf("line of wl/1: rates %+v; want remediate's %s reached, next at %s", l.Rates, rate, want)
		}
		if l, err := lr.ResourceLine(e.ctx, "wl/2", 10); err != nil || len(l.Rates) != 0 {
			t.Fatalf("line of wl/2: %+v, %v; want no rate reached", l, err)
		}
	}
	// Another resource, another kind: not held back.
	o := e.sub("remediate", "wl/2")
	e.complete(e.claimOne(o.ID, "remediate"))
	p := e.sub("plain", "wl/3")
	e.complete(e.claimOne(p.ID, "plain"))

	// Skip policy: the rate reached at the submit skips it.
	s1 := e.sub("remediate.skip", "wl/9")
	e.complete(e.claimOne(s1.ID, "remediate.skip"))
	s2 := e.sub("remediate.skip", "wl/8")
	e.complete(e.claimOne(s2.ID, "remediate.skip"))
	s3 := e.sub("remediate.skip", "wl/9")
	e.complete(e.claimOne(s3.ID, "remediate.skip"))
	skipped := e.sub("remediate.skip", "wl/9")
	if skipped.State != store.JobSkipped || len(skipped.Errors) != 1 || skipped.Errors[0].Code != store.CodeRateLimited ||
		skipped.Errors[0].Until.IsZero() || skipped.Head {
		t.Fatalf("submit under skip with the rate reached: %s; want skipped, %s with until", show(skipped), store.CodeRateLimited)
	}
	if until := skipped.Errors[0].Until; until.Before(s1.CreatedAt.Add(rate.Window-time.Minute)) || until.After(skipped.CreatedAt.Add(rate.Window)) {
		t.Fatalf("skipped until %s; want about an hour after the first grant", until)
	}
	if g := e.get(skipped.ID); g.State != store.JobSkipped || g.Errors[0].Code != store.CodeRateLimited || !g.Errors[0].Until.Equal(skipped.Errors[0].Until) {
		t.Fatalf("GetJob of the rate-skipped job: %s", show(g))
	}
	if n := e.sub("remediate.skip", "wl/8"); n.State == store.JobSkipped {
		t.Fatalf("wl/8 had one grant of two: %s; want queued", show(n))
	}
	// The kind statistics (the server's baton_job_rate_reached_resources) count the resources
	// whose rate is reached: remediate's wl/1 (wl/2 has one grant of two), remediate.skip's wl/9
	// (wl/8: one of two).
	if ks, ok := e.s.(store.KindStatsStore); ok {
		stats, err := ks.KindStats(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		reached := map[string]int64{}
		for _, st := range stats {
			reached[st.Kind] = st.RateReached
		}
		if reached["remediate"] != 1 || reached["remediate.skip"] != 1 || reached["plain"] != 0 {
			t.Fatalf("KindStats rate reached = %v; want remediate 1 (wl/1), remediate.skip 1 (wl/9), plain 0", reached)
		}
	}
	// Kinds read back carry their rate.
	kinds, err := e.s.Kinds(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if (k.Name == "plain") != (k.Rate == nil) || k.Rate != nil && *k.Rate != rate {
			t.Fatalf("kind %s read back with rate %v; want %s", k.Name, k.Rate, rate)
		}
	}
}

// testJobRateFrees: when the window frees, the waiting head becomes claimable by itself.
func testJobRateFrees(t *testing.T, h JobHarness) {
	rate := store.Rate{Max: 1, Window: time.Second}
	e := newJobEnv(t, h, store.Kind{Name: "once", Rate: &rate})
	requireLineRules(t, e)
	a, b := e.sub("once", "r/1"), e.sub("once", "r/1")
	first := e.complete(e.claimOne(a.ID, "once"))
	var got []*store.Job
	e.poll("the job after the window becomes claimable", 20*rate.Window, func() bool {
		got = e.claim(10, "once")
		return len(got) > 0
	})
	if len(got) != 1 || got[0].ID != b.ID || got[0].AttemptedAt.Sub(first.AttemptedAt) < rate.Window-rateSlack {
		t.Fatalf("claim after the window = %v (started %s after the first); want job %d, a window later", ids(got),
			got[0].AttemptedAt.Sub(first.AttemptedAt), b.ID)
	}
}

// testJobRateBadInput: a rate out of bounds is refused, naming the field.
func testJobRateBadInput(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	requireLineRules(t, e)
	for _, c := range []struct {
		rate  store.Rate
		field string
	}{
		{store.Rate{Max: 0, Window: time.Hour}, "rate.max"},
		{store.Rate{Max: 1_000_001, Window: time.Hour}, "rate.max"},
		{store.Rate{Max: 3, Window: 999 * time.Millisecond}, "rate.window"},
		{store.Rate{Max: 3, Window: 31 * 24 * time.Hour}, "rate.window"},
	} {
		err := e.s.RegisterKinds(e.ctx, []store.Kind{{Name: "bad.rate", Rate: &c.rate}})
		wantInvalid(t, "RegisterKinds with rate "+c.rate.String(), err, c.field)
	}
	if kinds, err := e.s.Kinds(e.ctx); err != nil || len(kinds) != 0 {
		t.Fatalf("Kinds after refused registrations = %v, %v; want none", kinds, err)
	}
}

// RunRateRestart checks that a kind rate's count survives reopening the store: open returns the
// same database each time (the caller closes the previous one when it opens the next).
func RunRateRestart(t *testing.T, open func() store.JobStore) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rate := store.Rate{Max: 1, Window: time.Hour}
	s := open()
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "restart.rated", Rate: &rate}}); err != nil {
		t.Fatal(err)
	}
	claimDone := func(s store.JobStore, want int) {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"restart.rated"}, Limit: 10, TTL: time.Minute})
		if err != nil || len(jobs) != want {
			t.Fatalf("ClaimJobs = %d jobs, %v; want %d", len(jobs), err, want)
		}
		for _, j := range jobs {
			if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "restart.rated", Resource: "restart/1"}); err != nil {
			t.Fatal(err)
		}
	}
	claimDone(s, 1)
	s = open()
	claimDone(s, 0)
	if _, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "restart.rated", Resource: "restart/2"}); err != nil {
		t.Fatal(err)
	}
	claimDone(s, 1)
}

// RunJobRateAudit runs the rate cases on stores made by newStore, which must keep the audit log:
// the grants are then checked as the audit log recorded them too, on the store's clock, for a
// store whose conformance harness keeps none (SQLite's).
func RunJobRateAudit(t *testing.T, newStore func(t *testing.T) store.JobStore) {
	audited := func(t *testing.T) store.JobStore {
		s := newStore(t)
		if as, ok := s.(AuditedJobStore); !ok || !as.Capabilities().Audit {
			t.Fatal("RunJobRateAudit needs a store opened with the audit log on")
		}
		return s
	}
	h := JobHarness{NewJobStore: audited}
	t.Run("RateNeverExceeded", func(t *testing.T) { testJobRateConcurrent(t, h) })
	t.Run("RateNeverExceededShared", func(t *testing.T) { testJobRateShared(t, h) })
	t.Run("LimitRateNeverExceeded", func(t *testing.T) { testLimitRate(t, h, true) })
	t.Run("PrefixRateNeverExceeded", func(t *testing.T) { testPrefixRate(t, h, true) })
}
