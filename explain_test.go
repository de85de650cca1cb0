package baton_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// explainCodes is the codes of e's reasons, in order.
func explainCodes(e *baton.Explanation) []string {
	var out []string
	for _, r := range e.Reasons {
		out = append(out, r.Code)
	}
	return out
}

func reasonOf(t *testing.T, e *baton.Explanation, code string) baton.WaitReason {
	t.Helper()
	for _, r := range e.Reasons {
		if r.Code == code {
			return r
		}
	}
	t.Fatalf("explanation of %s (job %d) has no %q reason: %v", e.Key, e.Job, code, explainCodes(e))
	return baton.WaitReason{}
}

func noReason(t *testing.T, e *baton.Explanation, code string) {
	t.Helper()
	for _, r := range e.Reasons {
		if r.Code == code {
			t.Fatalf("explanation of %s (job %d) says %q (%s); want not", e.Key, e.Job, code, r.Message)
		}
	}
}

// Each reason why a resource is not granted, or a job does not run, is named when it holds and
// only then.
func TestExplain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		l, err := baton.NewLocker(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{
			{Name: "plain"},
			{Name: "cool", ResourceCooldown: time.Hour},
			{Name: "guarded", FromStates: []string{"ready"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		explainKey := func(key string) *baton.Explanation {
			t.Helper()
			e, err := l.Explain(ctx, key)
			if err != nil {
				t.Fatalf("Explain(%s): %v", key, err)
			}
			return e
		}
		explainJob := func(id int64) *baton.Explanation {
			t.Helper()
			e, err := q.Explain(ctx, id)
			if err != nil {
				t.Fatalf("Explain(job %d): %v", id, err)
			}
			return e
		}
		submit := func(kind, resource string, delay time.Duration) int64 {
			t.Helper()
			r, err := q.Submit(ctx, baton.SubmitParams{Kind: kind, Resource: resource, Delay: delay})
			if err != nil {
				t.Fatal(err)
			}
			return r.Job.ID
		}
		claim := func(kind string) *store.Job {
			t.Helper()
			js, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{kind}, Limit: 1, TTL: time.Minute})
			if err != nil || len(js) != 1 {
				t.Fatalf("claim %s: %v, %v", kind, js, err)
			}
			return js[0]
		}

		// A free key: nothing to explain.
		if e := explainKey("ex/free"); len(e.Reasons) != 0 {
			t.Fatalf("Explain of a free key: %v", explainCodes(e))
		}
		// held, ahead, resting (cooldown).
		lease, err := l.TryAcquire(ctx, "ex/k", baton.WithHolder("ops"), baton.WithCooldown(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if r := reasonOf(t, explainKey("ex/k"), baton.WaitHeld); r.Holder != "ops" || r.Token != lease.Token || r.Job != 0 {
			t.Fatalf("held reason %+v; want ops, token %d", r, lease.Token)
		}
		if _, err := st.Acquire(ctx, &store.AcquireParams{Key: "ex/k", LeaseID: "waiter", Holder: "waiter", TTL: time.Minute, Wait: true}); err == nil {
			t.Fatal("a second holder was granted a held key")
		}
		if r := reasonOf(t, explainKey("ex/k"), baton.WaitAhead); r.Ahead != 1 || r.Holder != "waiter" {
			t.Fatalf("ahead reason %+v; want 1 ahead, first the waiter", r)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := reasonOf(t, explainKey("ex/k"), baton.WaitResting); r.Rest != store.ReasonCooldown || time.Until(r.Until) < 59*time.Minute {
			t.Fatalf("resting reason %+v; want cooldown, about an hour", r)
		}
		noReason(t, explainKey("ex/k"), baton.WaitHeld)

		// A job held by a running job; the no-worker reason goes once a worker asks.
		first := submit("plain", "ex/j", 0)
		c := claim("plain")
		if c.ID != first {
			t.Fatalf("claimed job %d, want %d", c.ID, first)
		}
		second := submit("plain", "ex/j", 0)
		e := explainJob(second)
		if r := reasonOf(t, e, baton.WaitHeld); r.Job != first || r.Token != c.Token {
			t.Fatalf("held reason of job %d: %+v; want job %d, token %d", second, r, first, c.Token)
		}
		noReason(t, e, baton.WaitNoWorker) // a worker claimed just now
		if e := explainJob(first); e.JobState != store.JobRunning || len(e.Reasons) != 0 {
			t.Fatalf("Explain of a running job: state %s, reasons %v", e.JobState, explainCodes(e))
		}

		// Tickets ahead of a job: a lock request that came first.
		hold, err := l.TryAcquire(ctx, "ex/a", baton.WithHolder("ops"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Acquire(ctx, &store.AcquireParams{Key: "ex/a", LeaseID: "w2", Holder: "lockwaiter", TTL: time.Minute, Wait: true}); err == nil {
			t.Fatal("granted a held key")
		}
		behind := submit("plain", "ex/a", 0)
		if r := reasonOf(t, explainJob(behind), baton.WaitAhead); r.Ahead != 1 || r.Holder != "lockwaiter" {
			t.Fatalf("ahead reason of job %d: %+v; want the lock request first", behind, r)
		}
		_ = hold.Release(ctx)

		// Resource cooldown after a job (a job queued behind it waits; one submitted during the
		// cooldown would be skipped).
		cooled := claim2(t, ctx, st, submit("cool", "ex/c", 0), "cool")
		next := submit("cool", "ex/c", 0)
		if _, err := st.CompleteJob(ctx, &store.CompleteParams{ID: cooled.ID, Token: cooled.Token}); err != nil {
			t.Fatal(err)
		}
		if r := reasonOf(t, explainJob(next), baton.WaitResting); r.Rest != store.ReasonResourceCooldown {
			t.Fatalf("resting reason of job %d: %+v; want %s", next, r, store.ReasonResourceCooldown)
		}

		// Guard, schedule, backoff.
		g := submit("guarded", "ex/g", 0)
		if r := reasonOf(t, explainJob(g), baton.WaitGuard); r.State != "" || !slices.Equal(r.Allowed, []string{"ready"}) {
			t.Fatalf("guard reason %+v; want state \"\", allowed [ready]", r)
		}
		later := submit("plain", "ex/s", time.Hour)
		if r := reasonOf(t, explainJob(later), baton.WaitScheduled); time.Until(r.Until) < 59*time.Minute {
			t.Fatalf("scheduled reason %+v; want about an hour", r)
		}
		f := claim2(t, ctx, st, submit("plain", "ex/b", 0), "plain")
		if _, err := st.FailJob(ctx, &store.FailParams{ID: f.ID, Token: f.Token, Message: "boom", RetryAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if r := reasonOf(t, explainJob(f.ID), baton.WaitBackingOff); time.Until(r.Until) < 59*time.Minute {
			t.Fatalf("backing-off reason %+v; want about an hour", r)
		}
		reasonOf(t, explainJob(g), baton.WaitNoWorker) // no worker of kind guarded ever asked
	})
}

// claim2 claims job id of kind (the head of its own resource).
func claim2(t *testing.T, ctx context.Context, st store.JobStore, id int64, kind string) *store.Job {
	t.Helper()
	js, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{kind}, Limit: 1, TTL: time.Minute})
	if err != nil || len(js) != 1 || js[0].ID != id {
		t.Fatalf("claim %s: %v, %v; want job %d", kind, js, err, id)
	}
	return js[0]
}

// No worker of a kind: named until a worker asks; an unknown kind (a row an operator deleted) is
// named as such.
func TestExplainNoWorkerAndUnknownKind(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "idle"}, {Name: "gone"}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.Submit(ctx, baton.SubmitParams{Kind: "idle", Resource: "nw/a"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := q.Explain(ctx, r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	reasonOf(t, e, baton.WaitNoWorker)
	if _, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"other"}, Limit: 1, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if e, _ := q.Explain(ctx, r.Job.ID); !slices.Contains(explainCodes(e), baton.WaitNoWorker) {
		t.Fatal("a claim of another kind made the no-worker reason go")
	}
	r2, err := q.Submit(ctx, baton.SubmitParams{Kind: "gone", Resource: "nw/b"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM job_kinds WHERE name = 'gone'`); err != nil {
		t.Fatal(err)
	}
	e, err = q.Explain(ctx, r2.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	reasonOf(t, e, baton.WaitUnknownKind)
}

// A job that waits for a full limit or an extra resource says which, and names the holders; a
// shared job is not held back by shared holders, an exclusive one is.
func TestExplainBeyond(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		lim, ok := st.(store.Limiter)
		if !ok {
			t.Skip("the store keeps no limits")
		}
		l, err := baton.NewLocker(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "fix"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lim.SetLimit(ctx, &store.SetLimitParams{Name: "zone/a", Capacity: 1}); err != nil {
			t.Fatal(err)
		}
		unit, err := l.TryAcquire(ctx, "node/0", baton.WithLimits("zone/a"), baton.WithHolder("fixer-0"))
		if err != nil {
			t.Fatal(err)
		}
		defer unit.Release(ctx)
		ext, err := l.TryAcquire(ctx, "dns/eu", baton.WithShared(), baton.WithHolder("reader-0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ext.Release(ctx)
		r, err := q.Submit(ctx, baton.SubmitParams{Kind: "fix", Resource: "node/1", Limits: []string{"zone/a"},
			Resources: []string{"dns/eu"}})
		if errors.Is(err, store.ErrUnsupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		e, err := q.Explain(ctx, r.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		full := reasonOf(t, e, baton.WaitLimit)
		if full.Limit != "zone/a" || full.InUse != 1 || full.Capacity != 1 || full.Holder != "fixer-0" ||
			!strings.Contains(full.Message, `limit "zone/a" full: 1 of 1, held by fixer-0`) {
			t.Fatalf("limit reason = %+v", full)
		}
		held := reasonOf(t, e, baton.WaitHeld)
		if held.Resource != "dns/eu" || !held.Shared || held.Holder != "reader-0" {
			t.Fatalf("held reason = %+v; want dns/eu held shared by reader-0", held)
		}
		s, err := q.Submit(ctx, baton.SubmitParams{Kind: "fix", Resource: "node/2", Mode: store.ModeShared,
			Resources: []string{"dns/eu"}})
		if err != nil {
			t.Fatal(err)
		}
		e, err = q.Explain(ctx, s.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		noReason(t, e, baton.WaitHeld)
		noReason(t, e, baton.WaitLimit)
	})
}

// Shared jobs of one resource: a shared job behind a waiting shared one is not held back by it;
// while two run, the exclusive job behind them is held back by both (held shared) with nobody
// ahead in the line, and the shared job behind it has it ahead.
func TestExplainSharedJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "plan", Mode: store.ModeShared},
			{Name: "apply"}}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, kind := range []string{"plan", "plan", "apply", "plan"} {
			r, err := q.Submit(ctx, baton.SubmitParams{Kind: kind, Resource: "state/prod"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.Job.ID)
		}
		explain := func(id int64) *baton.Explanation {
			t.Helper()
			e, err := q.Explain(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		noReason(t, explain(ids[1]), baton.WaitAhead)
		js, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"plan", "apply"}, Limit: 10, TTL: time.Minute})
		if err != nil || len(js) != 2 {
			t.Fatalf("claim: %v, %v; want the two plans", js, err)
		}
		e := explain(ids[2])
		held := reasonOf(t, e, baton.WaitHeld)
		if !held.Shared || !strings.Contains(held.Message, "held shared by") {
			t.Fatalf("held reason = %+v; want held shared by the two plans", held)
		}
		noReason(t, e, baton.WaitAhead)
		e = explain(ids[3])
		ahead := reasonOf(t, e, baton.WaitAhead)
		if ahead.Ahead != 1 || ahead.Job != ids[2] {
			t.Fatalf("ahead reason = %+v; want the apply, job %d, alone", ahead, ids[2])
		}
		noReason(t, e, baton.WaitHeld)
	})
}
