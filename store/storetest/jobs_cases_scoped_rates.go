package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Rates of limits and of key prefixes (store.Limit.Rate, store.RatePrefixer): every grant of a
// unit of a rated limit, and every grant of a key under a rated prefix, lease or job attempt,
// counts; at most Max of them in any window, on the store's clock.

// prefixRater is the store as a store.RatePrefixer, or the test is skipped.
func prefixRater(t *testing.T, e *jobEnv) store.RatePrefixer {
	t.Helper()
	rp, ok := e.s.(store.RatePrefixer)
	requireNotApplicable(t, ok, "the store keeps no prefix rates")
	return rp
}

// grantLog collects grant times (store clock) by the key the audit log files them under.
type grantLog struct {
	mu    sync.Mutex
	times []time.Time
	keys  map[string]string // the event kind that records a grant of the key
}

func (g *grantLog) add(key, event string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys == nil {
		g.keys = map[string]string{}
	}
	g.keys[key] = event
	g.times = append(g.times, at)
}

// scopedRateRun runs lockers (each taking locks leases named by lockKey, with limits) and
// workers claiming jobs (submitted by the caller, of kinds) until n grants happened; it returns
// their grant times, on the store's clock.
func scopedRateRun(t *testing.T, e *jobEnv, ls store.Store, lockers, locks int, lockKey func(l, i int) string, limits []string,
	workers int, kinds []string, n int) *grantLog {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	var g grantLog
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, lockers+workers)
	for l := range lockers {
		wg.Go(func() {
			for i := range locks {
				key := lockKey(l, i)
				id := fmt.Sprintf("rl-%d-%d", l, i)
				for {
					lease, err := waitFor(ctx, ls, &store.AcquireParams{Key: key, LeaseID: id, Holder: id, TTL: time.Minute, Wait: true, Limits: limits})
					if err == nil {
						g.add(lease.Key, store.EventAcquire, lease.AcquiredAt)
						release(t, ctx, ls, lease)
						done.Add(1)
						break
					}
					if !errors.Is(err, store.ErrLockHeld) && !errors.Is(err, store.ErrResting) {
						errs <- fmt.Errorf("%s: acquire: %w", id, err)
						return
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("%s: not granted: %w", id, err)
						return
					}
					time.Sleep(5 * time.Millisecond) // a waiter's poll; the store says when
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprintf("rw-%d", w)
			for ctx.Err() == nil && done.Load() < int64(n) {
				js, err := e.s.ClaimJobs(ctx, &store.ClaimParams{Worker: worker, Kinds: kinds, Limit: 2, TTL: time.Minute})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				for _, j := range js {
					g.add(j.Resource, store.EventJobClaim, j.AttemptedAt)
					if _, err := e.s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
						errs <- fmt.Errorf("%s: complete %d: %w", worker, j.ID, err)
						return
					}
					done.Add(1)
				}
				if len(js) == 0 {
					time.Sleep(10 * time.Millisecond) // a worker's poll
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := done.Load(); got != int64(n) {
		t.Fatalf("%d of %d grants before the deadline", got, n)
	}
	return &g
}

// checkAuditRate checks the grants the audit log recorded on g's keys (acquires and job claims);
// the store must keep one.
func checkAuditRate(t *testing.T, e *jobEnv, g *grantLog, what string, rate store.Rate, n int) {
	t.Helper()
	as, ok := e.s.(AuditedJobStore)
	if !ok || !as.Capabilities().Audit {
		t.Fatal("the audited rate cases need a store that keeps the audit log")
	}
	var ts []time.Time
	for key, kind := range g.keys {
		events, err := as.Events(e.ctx, &store.EventsParams{Key: key, Limit: store.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		var last time.Time
		for _, ev := range events {
			// A lease of several holds (a key and a limit's unit) is one grant with one event
			// per hold, all at its instant: counted once.
			if ev.Kind == kind && !ev.At.Equal(last) {
				ts = append(ts, ev.At)
				last = ev.At
			}
		}
	}
	checkRateWindows(t, "audit log of "+what, rate, ts, n)
}

// testLimitRateConcurrent: lockers and workers take units of one rated limit at once; its grants
// hold at most Max per window, and all are made.
func testLimitRateConcurrent(t *testing.T, h JobHarness) { testLimitRate(t, h, false) }

// testPrefixRateConcurrent: leases and jobs on several keys under one rated prefix; its grants
// hold at most Max per window, keys under no rated prefix are not counted.
func testPrefixRateConcurrent(t *testing.T, h JobHarness) { testPrefixRate(t, h, false) }

// testLimitRate is testLimitRateConcurrent; with audit, the grants the audit log recorded are
// checked too (RunJobRateAudit: a store whose audit log records each grant at its instant, as
// SQLite's does; PostgreSQL's records a grant through holds at its transaction's start).
func testLimitRate(t *testing.T, h JobHarness, audit bool) {
	rate := store.Rate{Max: 3, Window: time.Second}
	e := newJobEnv(t, h, store.Kind{Name: "api.call"})
	requireLineRules(t, e)
	ls, lim := beyondJobStore(t, e)
	if _, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: "cloud-api", Capacity: store.MaxLimitCapacity, Rate: &rate, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	const jobs, lockers, locks = 6, 3, 2
	for i := range jobs {
		e.submitBeyond(store.SubmitParams{Kind: "api.call", Resource: fmt.Sprintf("call/%d", i), Limits: []string{"cloud-api"}})
	}
	n := jobs + lockers*locks
	g := scopedRateRun(t, e, ls, lockers, locks, func(l, i int) string { return fmt.Sprintf("lk/%d-%d", l, i) },
		[]string{"cloud-api"}, 3, []string{"api.call"}, n)
	checkRateWindows(t, "grants of limit cloud-api", rate, g.times, n)
	if audit {
		checkAuditRate(t, e, g, "limit cloud-api", rate, n)
	}
	got, err := lim.Limits(e.ctx, &store.LimitsParams{Name: "cloud-api", Limit: 1})
	if err != nil || len(got) != 1 || got[0].Rate == nil || *got[0].Rate != rate {
		t.Fatalf("Limits(cloud-api) = %+v, %v; want its rate %s", got, err, rate)
	}
}

// testPrefixRate is testPrefixRateConcurrent; audit as for testLimitRate.
func testPrefixRate(t *testing.T, h JobHarness, audit bool) {
	rate := store.Rate{Max: 3, Window: time.Second}
	e := newJobEnv(t, h, store.Kind{Name: "provision"})
	requireLineRules(t, e)
	ls := resourceStore(t, e)
	rp := prefixRater(t, e)
	if _, err := rp.SetPrefixRate(e.ctx, &store.SetPrefixRateParams{Prefix: "cluster/", Rate: rate, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	const jobs, lockers, locks = 6, 3, 2
	for i := range jobs {
		e.sub("provision", fmt.Sprintf("cluster/c%d", i%3))
	}
	n := jobs + lockers*locks
	g := scopedRateRun(t, e, ls, lockers, locks, func(l, i int) string { return fmt.Sprintf("cluster/lk-%d-%d", l, i) },
		nil, 3, []string{"provision"}, n)
	checkRateWindows(t, "grants under prefix cluster/", rate, g.times, n)
	if audit {
		checkAuditRate(t, e, g, "prefix cluster/", rate, n)
	}
	// A key under no rated prefix: as many grants as asked, at once.
	for i := range rate.Max + 2 {
		id := fmt.Sprintf("free-%d", i)
		l, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "clusters", LeaseID: id, Holder: id, TTL: time.Minute})
		if err != nil {
			t.Fatalf("acquire %d of a key under no rated prefix: %v", i, err)
		}
		release(t, e.ctx, ls, l)
	}
}

// wantRateRefusal fails unless err is a rest for a rate (ReasonRate) naming whose.
func wantRateRefusal(t *testing.T, what string, err error, whose string) {
	t.Helper()
	var rest *store.RestingError
	if !errors.As(err, &rest) || rest.Reason != store.ReasonRate || !strings.Contains(err.Error(), whose) {
		t.Fatalf("%s: %v; want a rest for the rate of %s", what, err, whose)
	}
}

// testScopedRateWaits: once a limit's or a prefix's rate is reached, a lock request is refused
// for the rate, a job stays its resource's head and the line says why; under the skip policy a
// submit is skipped rate_limited. (Windows of an hour: nothing frees during the test.)
func testScopedRateWaits(t *testing.T, h JobHarness) {
	rate := store.Rate{Max: 1, Window: time.Hour}
	e := newJobEnv(t, h, store.Kind{Name: "deploy"}, store.Kind{Name: "deploy.skip", Policy: store.PolicySkip})
	requireLineRules(t, e)
	ls, lim := beyondJobStore(t, e)
	rp := prefixRater(t, e)
	if _, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: "hourly", Capacity: 10, Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	a, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "lr/a", LeaseID: "lr-a", Holder: "a", TTL: time.Minute, Limits: []string{"hourly"}})
	if err != nil {
		t.Fatal(err)
	}
	release(t, e.ctx, ls, a)
	_, err = ls.Acquire(e.ctx, &store.AcquireParams{Key: "lr/b", LeaseID: "lr-b", Holder: "b", TTL: time.Minute, Limits: []string{"hourly"}})
	wantRateRefusal(t, "a second unit of limit hourly within its window", err, `limit "hourly"`)
	j0 := e.submitBeyond(store.SubmitParams{Kind: "deploy", Resource: "lr/job", Limits: []string{"hourly"}})
	e.claimNone("the rate 1/1h of limit hourly is reached", "deploy")
	if got := e.get(j0.ID); !got.Head || got.State == store.JobRunning || got.ScheduledAt.Before(a.AcquiredAt.Add(rate.Window-rateSlack)) {
		t.Fatalf("job over the limit's rate: %s; want head, waiting an hour", show(got))
	}
	e.cancel(j0.ID)

	if _, err := rp.SetPrefixRate(e.ctx, &store.SetPrefixRateParams{Prefix: "pfx/", Rate: rate}); err != nil {
		t.Fatal(err)
	}
	j1, j2 := e.sub("deploy", "pfx/a"), e.sub("deploy", "pfx/b")
	first := e.complete(e.claimOne(j1.ID, "deploy"))
	e.claimNone("the rate 1/1h of prefix pfx/ is reached", "deploy")
	want := first.AttemptedAt.Add(rate.Window)
	if got := e.get(j2.ID); !got.Head || got.State == store.JobRunning || got.ScheduledAt.Before(want.Add(-rateSlack)) {
		t.Fatalf("second job under the prefix: %s; want head, waiting until %s", show(got), want.Format(time.RFC3339Nano))
	}
	if lr, ok := e.s.(store.LineReader); ok {
		l, err := lr.ResourceLine(e.ctx, "pfx/b", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Rates) != 1 || l.Rates[0].Prefix != "pfx/" || l.Rates[0].Rate != rate ||
			l.Rates[0].Next.Before(want.Add(-rateSlack)) || l.Rates[0].Next.After(want.Add(rateSlack)) {
			t.Fatalf("line of pfx/b: rates %+v; want prefix pfx/'s %s reached, next at %s", l.Rates, rate, want)
		}
	}
	_, err = ls.Acquire(e.ctx, &store.AcquireParams{Key: "pfx/lock", LeaseID: "pfx-l", Holder: "l", TTL: time.Minute})
	wantRateRefusal(t, "a lease under prefix pfx/ within its window", err, `prefix "pfx/"`)
	skipped := e.sub("deploy.skip", "pfx/c")
	if skipped.State != store.JobSkipped || len(skipped.Errors) != 1 || skipped.Errors[0].Code != store.CodeRateLimited ||
		skipped.Errors[0].Until.Before(want.Add(-rateSlack)) {
		t.Fatalf("submit under skip with the prefix's rate reached: %s; want skipped, %s until %s", show(skipped), store.CodeRateLimited, want)
	}
	// Listed, then deleted: the prefix's keys are no longer counted.
	prs, err := rp.PrefixRates(e.ctx, &store.PrefixRatesParams{})
	if err != nil || len(prs) != 1 || prs[0].Prefix != "pfx/" || prs[0].Rate != rate {
		t.Fatalf("PrefixRates = %+v, %v; want pfx/ at %s", prs, err, rate)
	}
	if err := rp.DeletePrefixRate(e.ctx, &store.DeletePrefixRateParams{Prefix: "pfx/"}); err != nil {
		t.Fatal(err)
	}
	if err := rp.DeletePrefixRate(e.ctx, &store.DeletePrefixRateParams{Prefix: "pfx/"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting a prefix rate twice: %v; want ErrNotFound", err)
	}
	l, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "pfx/lock", LeaseID: "pfx-l2", Holder: "l", TTL: time.Minute})
	if err != nil {
		t.Fatalf("a lease under a prefix whose rate was deleted: %v", err)
	}
	release(t, e.ctx, ls, l)
}

// testScopedRateFrees: a waiter over a limit's rate, and a job over a prefix's, are granted once
// the window (1 s) frees, not before, and no later than a few windows (the job's resource is
// not held back by its predecessor's attempt once that ended).
func testScopedRateFrees(t *testing.T, h JobHarness) {
	rate := store.Rate{Max: 1, Window: time.Second}
	e := newJobEnv(t, h, store.Kind{Name: "deploy"})
	requireLineRules(t, e)
	ls, lim := beyondJobStore(t, e)
	rp := prefixRater(t, e)
	if _, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: "one", Capacity: 10, Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	a, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "lf/a", LeaseID: "lf-a", Holder: "a", TTL: time.Minute, Limits: []string{"one"}})
	if err != nil {
		t.Fatal(err)
	}
	release(t, e.ctx, ls, a)
	bp := &store.AcquireParams{Key: "lf/b", LeaseID: "lf-b", Holder: "b", TTL: time.Minute, Limits: []string{"one"}, Wait: true}
	var b *store.Lease
	e.poll("the waiter over the limit's rate is granted once the window frees", 20*rate.Window, func() bool {
		b, err = waitFor(e.ctx, ls, bp)
		if err != nil && !errors.Is(err, store.ErrResting) {
			t.Fatalf("waiting acquire over the rate: %v", err)
		}
		return err == nil
	})
	if d := b.AcquiredAt.Sub(a.AcquiredAt); d < rate.Window-rateSlack {
		t.Fatalf("limit one: granted %s after the first; want a window (%s)", d, rate.Window)
	}
	release(t, e.ctx, ls, b)

	if _, err := rp.SetPrefixRate(e.ctx, &store.SetPrefixRateParams{Prefix: "pf1/", Rate: rate}); err != nil {
		t.Fatal(err)
	}
	// Both on one resource: the first attempt's end frees it at once, so only the rate holds
	// the second back.
	j1, j2 := e.sub("deploy", "pf1/a"), e.sub("deploy", "pf1/a")
	first := e.complete(e.claimOne(j1.ID, "deploy"))
	var got []*store.Job
	e.poll("the job under the prefix becomes claimable once the window frees", 20*rate.Window, func() bool {
		got = e.claim(10, "deploy")
		return len(got) > 0
	})
	if len(got) != 1 || got[0].ID != j2.ID || got[0].AttemptedAt.Sub(first.AttemptedAt) < rate.Window-rateSlack {
		t.Fatalf("claim after the window = %v; want job %d, a window after the first", ids(got), j2.ID)
	}
	e.complete(got[0])
	// Nothing of the two attempts is left holding the resource.
	l, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "pf1-free", LeaseID: "pf1-free", Holder: "x", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	release(t, e.ctx, ls, l)
	if lr, ok := e.s.(store.LineReader); ok {
		line, err := lr.ResourceLine(e.ctx, "pf1/a", 10)
		if err != nil || len(line.Holders) != 0 || line.Holder != nil {
			t.Fatalf("line of pf1/a after both jobs ended: %+v, %v; want no holder", line, err)
		}
	}
}

// testScopedRateBadInput: a limit's or a prefix's rate out of bounds, or overlapping rated
// prefixes, are refused naming the field.
func testScopedRateBadInput(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h)
	requireLineRules(t, e)
	_, lim := beyondJobStore(t, e)
	rp := prefixRater(t, e)
	for _, c := range []struct {
		rate  store.Rate
		field string
	}{
		{store.Rate{Max: 0, Window: time.Hour}, "rate.max"},
		{store.Rate{Max: 1_000_001, Window: time.Hour}, "rate.max"},
		{store.Rate{Max: 3, Window: 999 * time.Millisecond}, "rate.window"},
		{store.Rate{Max: 3, Window: 31 * 24 * time.Hour}, "rate.window"},
	} {
		_, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: "bad", Capacity: 1, Rate: &c.rate})
		wantInvalid(t, "SetLimit with rate "+c.rate.String(), err, c.field)
		_, err = rp.SetPrefixRate(e.ctx, &store.SetPrefixRateParams{Prefix: "bad/", Rate: c.rate})
		wantInvalid(t, "SetPrefixRate with rate "+c.rate.String(), err, c.field)
	}
	ok := store.Rate{Max: 5, Window: time.Minute}
	if _, err := rp.SetPrefixRate(e.ctx, &store.SetPrefixRateParams{Prefix: "tenant/", Rate: ok}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tenant/a/", "ten", ""} {
		_, err := rp.SetPrefixRate(e.ctx, &store.SetPrefixRateParams{Prefix: p, Rate: ok})
		wantInvalid(t, fmt.Sprintf("SetPrefixRate(%q) beside tenant/", p), err, "prefix")
	}
	if ls, err := lim.Limits(e.ctx, &store.LimitsParams{Limit: 10}); err != nil || len(ls) != 0 {
		t.Fatalf("Limits after refused sets = %v, %v; want none", ls, err)
	}
	if prs, err := rp.PrefixRates(e.ctx, &store.PrefixRatesParams{}); err != nil || len(prs) != 1 {
		t.Fatalf("PrefixRates after refused sets = %v, %v; want tenant/ alone", prs, err)
	}
}
