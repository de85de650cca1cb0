package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// Every audited change names its authenticated principal (store.Event.Principal), including the
// changes the conformance suite does not reach: the new owner for an expiry takeover, the admin
// for a force-release, a cleared rest and a cleared resource cooldown, the owner for an attempt's
// claim and end, and nobody for an attempt the reaper ended (the store's own change).
func TestAuditPrincipals(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "apply", MaxAttempts: 2, ResourceCooldown: time.Hour})
	id := func(name string) string { return pgx.Identifier{s.Schema(), name}.Sanitize() }
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "h", Owner: "alice", TTL: time.Minute}))
	exec(t, "UPDATE "+id("leases")+" SET expires_at = now() - interval '1 second', available_at = now() - interval '1 second'")
	must(s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "b", Holder: "h", Owner: "bob", TTL: time.Minute, LockDelay: time.Hour}))
	must(s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "k", Reason: "stuck", Actor: "ops", Principal: "root"}))
	must(s.ClearRest(ctx, &store.ClearRestParams{Key: "k", Reason: "drained", Actor: "ops", Principal: "admin"}))

	submit(t, s, "apply", "r")
	claim := func(owner string) *store.Job {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Owner: owner, Kinds: []string{"apply"}, Limit: 1, TTL: time.Minute})
		if err != nil || len(jobs) != 1 || jobs[0].Owner != owner {
			t.Fatalf("ClaimJobs by %s = %v, %v; want one job owned by %s", owner, jobs, err, owner)
		}
		return jobs[0]
	}
	claim("carol")
	exec(t, "UPDATE "+id("jobs")+" SET lease_expires_at = now() - interval '1 second'")
	reaped, err := s.ReapJobs(ctx, &store.ReapParams{})
	if err != nil || len(reaped) != 1 || reaped[0].Job.Owner != "carol" {
		t.Fatalf("ReapJobs = %v, %v; want carol's attempt (its owner kept)", reaped, err)
	}
	j := claim("dave")
	must(s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token, Owner: "dave"}))
	must(s.ClearResourceCooldown(ctx, &store.ClearCooldownParams{Resource: "r", Reason: "checked", Actor: "ops", Principal: "root"}))

	checkPrincipals(t, s, "k", []string{"acquire alice", "expiry_takeover bob", "force_release root", "clear_rest admin"})
	// The hand-made expiry of carol's lease passes for her attempt's first renewal.
	checkPrincipals(t, s, "r", []string{"job_claim carol", "job_renew carol", "job_complete ", "job_claim dave",
		"job_complete dave", "resource_cooldown_cleared root"})
}

// checkPrincipals compares the audit log of key, as "kind principal" per event, with want.
func checkPrincipals(t *testing.T, s store.Store, key string, want []string) {
	t.Helper()
	events, err := s.Events(testCtx(t), &store.EventsParams{Key: key})
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

// A schema of version 8 carries over to owners (migration 0009): its leases and attempts belong
// to no owner, and its audit triggers, which stay, call functions that record the principal.
func TestMigrateToOwners(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	schema := newSchema(t)
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.MigrateTo(ctx, pool, schema, 8); err != nil {
		t.Fatal(err)
	}
	if err := postgres.EnableAudit(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	for _, q := range []string{
		`INSERT INTO ` + id("leases") + ` (key, lease_id, holder, token, acquired_at, expires_at, available_at, cooldown_ms, lock_delay_ms)
			VALUES ('old', 'old-1', 'h', nextval('` + id("token_seq") + `'), now(), now() + interval '1 hour', now() + interval '1 hour', 0, 0)`,
		`INSERT INTO ` + id("job_kinds") + ` (name, policy, max_attempts) VALUES ('k', 'queue', 1)`,
		`INSERT INTO ` + id("resources") + ` (key) VALUES ('r')`,
		`INSERT INTO ` + id("jobs") + ` (seq, kind, resource, state, head, max_attempts, scheduled_at)
			VALUES (nextval('` + id("job_seq") + `'), 'k', 'r', 'available', true, 1, now())`,
		`UPDATE ` + id("jobs") + ` SET state = 'running', attempt = 1, attempted_at = now(), worker = 'w',
			token = nextval('` + id("token_seq") + `'), lease_expires_at = now() + interval '1 hour'`,
	} {
		exec(t, q)
	}

	s := openStore(t, schema)
	if l, err := s.Get(ctx, "old"); err != nil || l.Owner != "" {
		t.Fatalf("Get(old) = %+v, %v; want the lease, owner \"\"", l, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "old", LeaseID: "old-1", Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew of the old lease by alice: %v; want ErrNotHeld", err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "old", LeaseID: "old-1"}); err != nil {
		t.Fatalf("release of the old lease without an owner: %v", err)
	}
	running, err := s.ListJobs(ctx, &store.JobListParams{State: store.JobRunning, Limit: 1})
	if err != nil || len(running) != 1 || running[0].Owner != "" {
		t.Fatalf("the running job = %v, %v; want one, owner \"\"", running, err)
	}
	j := running[0]
	if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token, Owner: "alice"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("completion of the old attempt by alice: %v; want ErrNotHeld", err)
	}
	if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
		t.Fatalf("completion of the old attempt without an owner: %v", err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "new", LeaseID: "n", Holder: "h", Owner: "alice", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	checkPrincipals(t, s, "old", []string{"acquire ", "release "})
	checkPrincipals(t, s, "r", []string{"job_claim ", "job_complete "})
	checkPrincipals(t, s, "new", []string{"acquire alice"})
}

// CompleteManyAndClaim completes only the attempts of the owners named, and the jobs it claims
// are the claim's owner's.
func TestCompleteManyAndClaimOwners(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k"})
	submit(t, s, "k", "r1")
	submit(t, s, "k", "r2")
	jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Owner: "alice", Kinds: []string{"k"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("ClaimJobs = %v, %v", jobs, err)
	}
	a := jobs[0]
	claim := &store.ClaimParams{Worker: "w2", Owner: "bob", Kinds: []string{"k"}, Limit: 1, TTL: time.Minute}
	done, claimed, err := s.CompleteManyAndClaim(ctx, []*store.CompleteParams{{ID: a.ID, Token: a.Token, Owner: "bob"}}, claim)
	if err != nil || len(done) != 1 || done[0] != nil || len(claimed) != 1 || claimed[0].Owner != "bob" {
		t.Fatalf("CompleteManyAndClaim of alice's attempt by bob = %v, %v, %v; want no completion and one job for bob",
			done, claimed, err)
	}
	if j, err := s.GetJob(ctx, a.ID); err != nil || j.State != store.JobRunning || j.Owner != "alice" {
		t.Fatalf("alice's job after bob's completion = %+v, %v; want running, alice's", j, err)
	}
	b := claimed[0]
	done, _, err = s.CompleteManyAndClaim(ctx, []*store.CompleteParams{{ID: a.ID, Token: a.Token, Owner: "alice"},
		{ID: b.ID, Token: b.Token, Owner: "bob"}}, claim)
	if err != nil || len(done) != 2 || done[0] == nil || done[0].Owner != "alice" || done[1] == nil || done[1].Owner != "bob" {
		t.Fatalf("CompleteManyAndClaim by the owners = %v, %v; want both completed", done, err)
	}
}
