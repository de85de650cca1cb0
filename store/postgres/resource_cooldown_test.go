package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// A resource's cooldown is in the database: a store opened again (a restart) still skips submits
// to it, SubmitJobTx too; its clear is in the audit log.
func TestResourceCooldownSurvivesReopenAndSkipsInTx(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "remediate", Policy: store.PolicySkip, ResourceCooldown: time.Hour})
	j := submit(t, s, "remediate", "node/1")
	got := claim(t, s, 1, "remediate")
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: got[0].ID, Token: got[0].Token}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := openStore(t, s.Schema())
	var skipped *store.Job
	err := pgx.BeginFunc(ctx, s2.Pool(), func(tx pgx.Tx) error {
		res, err := s2.SubmitJobTx(ctx, tx, &store.SubmitParams{Kind: "remediate", Resource: "node/1"})
		if err == nil {
			skipped = res.Job
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, left, ok := skipped.CooldownSkip(); !ok || left <= 59*time.Minute || skipped.Head {
		t.Fatalf("SubmitJobTx after a reopen, during the cooldown: %+v; want skipped with about 1h left", skipped)
	}
	c, err := s2.ClearResourceCooldown(ctx, &store.ClearCooldownParams{Resource: "node/1", Reason: "checked", Actor: "ops"})
	if err != nil || c.Job != j.ID {
		t.Fatalf("ClearResourceCooldown = %+v, %v", c, err)
	}
	// The log of node/1 also holds the jobs' claims and completions (job_claim, job_complete);
	// the clear is the last entry.
	evs, err := s2.Events(ctx, &store.EventsParams{Key: "node/1"})
	if err != nil || len(evs) == 0 {
		t.Fatalf("audit log of node/1 = %v, %v", evs, err)
	}
	if last := evs[len(evs)-1]; last.Kind != store.EventResourceCooldownCleared || last.Actor != "ops" ||
		last.Token != uint64(j.ID) ||
		last.Reason != "checked" {
		t.Fatalf("last event of node/1 = %+v; want the clear by ops", last)
	}
	if j := submit(t, s2, "remediate", "node/1"); j.State != store.JobAvailable {
		t.Fatalf("submit after the clear: %+v", j)
	}
}
