package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// Every audited change names its authenticated principal (store.Event.Principal), including the
// changes the conformance suite does not reach: the new owner for an expiry takeover, the admin
// for a force-release, a cleared rest and a cleared resource cooldown, the owner for an attempt's
// claim and end, and nobody for an attempt the reaper ended (the store's own change).
func TestAuditPrincipals(t *testing.T) {
	ctx := context.Background()
	c := &offsetClock{}
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "baton.db"), sqlite.Config{Audit: true, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "h", Owner: "alice", TTL: time.Second}))
	c.off.Add(int64(2 * time.Second))
	must(s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "b", Holder: "h", Owner: "bob", TTL: time.Minute, LockDelay: time.Hour}))
	must(s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "k", Reason: "stuck", Actor: "ops", Principal: "root"}))
	must(s.ClearRest(ctx, &store.ClearRestParams{Key: "k", Reason: "drained", Actor: "ops", Principal: "admin"}))

	must(nil, s.RegisterKinds(ctx, []store.Kind{{Name: "apply", MaxAttempts: 2, ResourceCooldown: time.Hour}}))
	must(s.SubmitJob(ctx, &store.SubmitParams{Kind: "apply", Resource: "r"}))
	claim := func(owner string) *store.Job {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Owner: owner, Kinds: []string{"apply"}, Limit: 1, TTL: time.Second})
		if err != nil || len(jobs) != 1 || jobs[0].Owner != owner {
			t.Fatalf("ClaimJobs by %s = %v, %v; want one job owned by %s", owner, jobs, err, owner)
		}
		return jobs[0]
	}
	claim("carol")
	c.off.Add(int64(2 * time.Second))
	reaped, err := s.ReapJobs(ctx, &store.ReapParams{})
	if err != nil || len(reaped) != 1 || reaped[0].Job.Owner != "carol" {
		t.Fatalf("ReapJobs = %v, %v; want carol's attempt (its owner kept)", reaped, err)
	}
	j := claim("dave")
	must(s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token, Owner: "dave"}))
	must(s.ClearResourceCooldown(ctx, &store.ClearCooldownParams{Resource: "r", Reason: "checked", Actor: "ops", Principal: "root"}))

	checkPrincipals(t, s, "k", []string{"acquire alice", "expiry_takeover bob", "force_release root", "clear_rest admin"})
	checkPrincipals(t, s, "r", []string{"job_claim carol", "job_complete ", "job_claim dave", "job_complete dave",
		"resource_cooldown_cleared root"})
}

// checkPrincipals compares the audit log of key, as "kind principal" per event, with want.
func checkPrincipals(t *testing.T, s store.Store, key string, want []string) {
	t.Helper()
	events, err := s.Events(context.Background(), &store.EventsParams{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, e.Kind+" "+e.Principal)
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("audit log of %q (kind principal):\n got %q\nwant %q", key, got, want)
	}
}
