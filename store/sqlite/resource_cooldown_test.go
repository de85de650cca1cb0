package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// A resource's cooldown is in the file: a store opened again (a restart) still skips submits to
// it until the cooldown's end on the store's clock; its clear is in the audit log.
func TestResourceCooldownSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	path := filepath.Join(t.TempDir(), "jobs.db")
	open := func() *sqlite.Store {
		s, err := sqlite.Open(ctx, path, sqlite.Config{Now: c.now, Audit: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open()
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "remediate", ResourceCooldown: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	x := &jobsT{t: t, s: s, clock: c, path: path, ctx: ctx}
	j := x.submit("remediate", "node/1")
	x.complete(x.claimOnly(j.ID, "remediate"))
	s.Close()

	x.s = open()
	c.advance(59 * time.Minute)
	if _, left, ok := x.submit("remediate", "node/1").CooldownSkip(); !ok || left != time.Minute {
		t.Fatalf("submit after a reopen, a minute before the cooldown's end: left %s, %v; want skipped, 1m left", left, ok)
	}
	c.advance(time.Minute)
	next := x.submit("remediate", "node/1")
	if next.State != store.JobAvailable || !next.Head {
		t.Fatalf("submit at the cooldown's end: %+v; want an available head", next)
	}
	x.complete(x.claimOnly(next.ID, "remediate"))
	cl, err := x.s.ClearResourceCooldown(ctx, &store.ClearCooldownParams{Resource: "node/1", Reason: "checked", Actor: "ops"})
	if err != nil || cl.Job != next.ID || cl.Left != time.Hour {
		t.Fatalf("ClearResourceCooldown = %+v, %v; want job %d's, 1h left", cl, err, next.ID)
	}
	// The log of node/1 also holds the jobs' claims and completions (job_claim, job_complete);
	// the clear is the last entry.
	evs, err := x.s.Events(ctx, &store.EventsParams{Key: "node/1"})
	if err != nil || len(evs) == 0 {
		t.Fatalf("audit log of node/1 = %v, %v", evs, err)
	}
	if last := evs[len(evs)-1]; last.Kind != store.EventResourceCooldownCleared || last.Actor != "ops" ||
		last.Token != uint64(next.ID) {
		t.Fatalf("last event of node/1 = %+v; want the clear by ops", last)
	}
}
