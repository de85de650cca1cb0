package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// A job attempt belongs to the owner that claimed it: a heartbeat, completion or failure by
// another owner (or by a caller without one) is refused with ErrNotHeld and changes nothing,
// even with the attempt's token, which anyone who can list jobs sees.
func testJobOwnerKeepsAttempt(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "owned.apply"})
	if c, ok := e.s.(interface{ Capabilities() store.Capabilities }); ok && !c.Capabilities().Owners {
		t.Skip("not applicable: the store takes no owner from its caller")
	}
	sub := e.sub("owned.apply", "owned/workspace")
	jobs, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: "w", Owner: "alice", Kinds: []string{"owned.apply"}, Limit: 1, TTL: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != sub.ID || jobs[0].Owner != "alice" {
		t.Fatalf("ClaimJobs by alice = %v, %v; want job %d owned by alice", jobs, err, sub.ID)
	}
	j := jobs[0]
	unchanged := func(after string) {
		t.Helper()
		got := e.get(j.ID)
		if got.State != store.JobRunning || got.Token != j.Token || got.Owner != "alice" || !got.LeaseExpiresAt.Equal(j.LeaseExpiresAt) {
			t.Fatalf("after %s: job = %s; want alice's running attempt (token %d, lease until %s) unchanged",
				after, show(got), j.Token, j.LeaseExpiresAt)
		}
	}
	for _, owner := range []string{"bob", ""} {
		if _, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, Owner: owner, TTL: time.Second}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("heartbeat by owner %q: %v; want ErrNotHeld", owner, err)
		}
		unchanged(fmt.Sprintf("a heartbeat by owner %q", owner))
		if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token, Owner: owner}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("complete by owner %q: %v; want ErrNotHeld", owner, err)
		}
		unchanged(fmt.Sprintf("a completion by owner %q", owner))
		if mc, ok := e.s.(store.ManyCompleter); ok {
			done, err := mc.CompleteMany(e.ctx, []*store.CompleteParams{{ID: j.ID, Token: j.Token, Owner: owner}})
			if err != nil || len(done) != 1 || done[0] != nil {
				t.Fatalf("CompleteMany by owner %q = %v, %v; want no completion", owner, done, err)
			}
			unchanged(fmt.Sprintf("CompleteMany by owner %q", owner))
		}
		if _, err := e.s.FailJob(e.ctx, &store.FailParams{ID: j.ID, Token: j.Token, Owner: owner, Permanent: true}); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("fail by owner %q: %v; want ErrNotHeld", owner, err)
		}
		unchanged(fmt.Sprintf("a failure by owner %q", owner))
	}
	if _, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, Owner: "alice", TTL: time.Minute}); err != nil {
		t.Fatalf("heartbeat by the owner: %v", err)
	}
	done, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token, Owner: "alice"})
	if err != nil || done.State != store.JobSucceeded || done.Owner != "alice" {
		t.Fatalf("complete by the owner = %s, %v; want succeeded, owner alice", show(done), err)
	}
	// A bad owner is refused by name.
	_, err = e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: "w", Owner: "a\x00b", Kinds: []string{"owned.apply"}, Limit: 1, TTL: time.Minute})
	wantInvalid(t, "ClaimJobs with a control character in the owner", err, "owner")
}
