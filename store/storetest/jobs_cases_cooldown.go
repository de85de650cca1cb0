package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// testJobResourceCooldown: a job of a kind with a ResourceCooldown that ends on a resource puts
// the resource in cooldown for every kind: submits (one, a batch with and without idempotency
// keys, any policy) are skipped with the time left, not queued; a job queued before starts after
// it; GetResource shows it; ClearResourceCooldown ends it, and the postponed head is claimable.
func testJobResourceCooldown(t *testing.T, h JobHarness) {
	const cooldown = time.Hour
	e := newJobEnv(t, h, store.Kind{Name: "remediate", Policy: store.PolicySkip, ResourceCooldown: cooldown},
		store.Kind{Name: "observe"}, store.Kind{Name: "drain", Policy: store.PolicyReject}, store.Kind{Name: "other"})
	a := e.sub("remediate", "node/1")
	queued := e.sub("observe", "node/1")
	if r := e.resource("node/1"); r.Cooldown != nil {
		t.Fatalf("resource before any job ended: cooldown %+v", r.Cooldown)
	}
	done := e.complete(e.claimOne(a.ID, "remediate"))
	wantUntil := done.FinishedAt.Add(cooldown)
	checkSkip := func(what string, j *store.Job) {
		t.Helper()
		until, left, ok := j.CooldownSkip()
		if !ok || j.State != store.JobSkipped || j.Head || j.FinishedAt.IsZero() || j.Attempt != 0 ||
			until.Before(wantUntil.Add(-clockSlack)) || until.After(wantUntil.Add(clockSlack)) ||
			left <= cooldown-time.Minute || left > cooldown {
			t.Fatalf("%s while node/1 cools down: %s (until %s, left %s); want skipped with code %s, until %s, about 1h left",
				what, show(j), until.Format(time.RFC3339Nano), left, store.CodeResourceCooldown, wantUntil.Format(time.RFC3339Nano))
		}
	}
	for _, kind := range []string{"remediate", "observe", "drain"} {
		j := e.sub(kind, "node/1")
		checkSkip("submit of "+kind, j)
		if got := e.get(j.ID); got.State != store.JobSkipped || len(got.Errors) != 1 || !got.Errors[0].Until.Equal(j.Errors[0].Until) {
			t.Fatalf("GetJob of the skipped job: %s", show(got))
		}
	}
	batch := e.submitMany(store.SubmitParams{Kind: "remediate", Resource: "node/1"},
		store.SubmitParams{Kind: "other", Resource: "node/2"}, store.SubmitParams{Kind: "drain", Resource: "node/1"})
	checkSkip("batch job 0", batch[0].Job)
	checkSkip("batch job 2", batch[2].Job)
	if j := batch[1].Job; j.State != store.JobAvailable || !j.Head {
		t.Fatalf("a job on another resource in the batch: %s; want an available head", show(j))
	}
	keyed := e.submitMany(store.SubmitParams{Kind: "observe", Resource: "node/1", IdempotencyKey: "cool-k1"},
		store.SubmitParams{Kind: "other", Resource: "node/3", IdempotencyKey: "cool-k2"})
	checkSkip("keyed batch job 0", keyed[0].Job)
	if j := keyed[1].Job; j.State != store.JobAvailable || !j.Head {
		t.Fatalf("a keyed job on another resource: %s; want an available head", show(j))
	}

	// The job queued before the cooldown began starts after it.
	if q := e.get(queued.ID); !q.Head || q.ScheduledAt.Before(wantUntil.Add(-clockSlack)) {
		t.Fatalf("job queued behind the one that started the cooldown: %s; want head, scheduled at its end", show(q))
	}
	e.claimNone("node/1 is cooling down", "observe", "remediate")
	r := e.resource("node/1")
	if c := r.Cooldown; c == nil || c.Job != a.ID || c.Resource != "node/1" || c.Left <= cooldown-time.Minute ||
		c.Until.Before(wantUntil.Add(-clockSlack)) || c.Until.After(wantUntil.Add(clockSlack)) {
		t.Fatalf("GetResource during the cooldown: cooldown %+v; want job %d's, about 1h left", c, a.ID)
	}
	if r.Unfinished != 1 {
		t.Fatalf("node/1 has %d unfinished jobs; want only the queued one (skipped jobs are not queued)", r.Unfinished)
	}

	// An operator clears it.
	if _, err := e.s.ClearResourceCooldown(e.ctx, &store.ClearCooldownParams{Resource: "node/1"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("ClearResourceCooldown without a reason: %v; want ErrInvalidArgument", err)
	}
	c, err := e.s.ClearResourceCooldown(e.ctx, &store.ClearCooldownParams{Resource: "node/1", Reason: "node checked", Actor: "ops"})
	if err != nil || c.Job != a.ID || c.Left <= cooldown-time.Minute || c.Until.Before(wantUntil.Add(-clockSlack)) {
		t.Fatalf("ClearResourceCooldown = %+v, %v; want job %d's cooldown, about 1h left", c, err, a.ID)
	}
	if r := e.resource("node/1"); r.Cooldown != nil {
		t.Fatalf("GetResource after the clear: cooldown %+v", r.Cooldown)
	}
	for _, key := range []string{"node/1", "node/2", "never-used"} {
		if _, err := e.s.ClearResourceCooldown(e.ctx, &store.ClearCooldownParams{Resource: key, Reason: "again"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ClearResourceCooldown of %s, not cooling down: %v; want ErrNotFound", key, err)
		}
	}
	e.complete(e.claimOne(queued.ID, "observe"))
	b := e.sub("remediate", "node/1")
	if b.State != store.JobAvailable || !b.Head {
		t.Fatalf("submit after the clear: %s; want an available head", show(b))
	}

	// A failed remediation (discarded) starts the cooldown too.
	claimed := e.claimOne(b.ID, "remediate")
	if j := e.fail(claimed, store.FailParams{Message: "drain timed out", Permanent: true}); j.State != store.JobDiscarded {
		t.Fatalf("permanent failure: %s", show(j))
	}
	j := e.sub("observe", "node/1")
	if _, left, ok := j.CooldownSkip(); !ok || left <= cooldown-time.Minute {
		t.Fatalf("submit after a discarded remediation: %s; want skipped for the cooldown", show(j))
	}
	if r := e.resource("node/1"); r.Cooldown == nil || r.Cooldown.Job != b.ID {
		t.Fatalf("cooldown after the discarded job: %+v; want job %d's", r.Cooldown, b.ID)
	}
}
